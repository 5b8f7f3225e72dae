const _: () = {
    #[allow(unused_imports)]
    use ::apiforge_runtime::codegen::v1::{
        ViaDefault as _, ViaNothing as _, ViaNothingDefault as _, ViaNothingPublish as _,
        ViaNothingUpdate as _, ViaOption as _, ViaPublish as _, ViaValidate as _,
        ViaValidateUpdate as _, ViaValue as _,
    };
    #[automatically_derived]
    impl ::apiforge_runtime::codegen::v1::Resource for Database {
        const INFO: ::apiforge_runtime::codegen::v1::KindInfo = ::apiforge_runtime::codegen::v1::KindInfo {
            group: "showcase.example.com",
            version: "v1",
            kind: "Database",
            plural: "databases",
            singular: "database",
            scope: ::apiforge_runtime::codegen::v1::Scope::Namespaced,
            short_names: &["db"],
            categories: &[],
            printer_columns: &[
                ::apiforge_runtime::codegen::v1::PrinterColumn {
                    name: "Replicas",
                    type_: "integer",
                    json_path: ".spec.replicas",
                    priority: 0i32,
                    description: "",
                    format: "",
                },
            ],
            openapi_name: "com.example.showcase.v1.Database",
            selectable_fields: &[".spec.engine"],
            subresources: ::apiforge_runtime::codegen::v1::Subresources {
                status: true,
                scale: ::core::option::Option::Some(::apiforge_runtime::codegen::v1::ScaleSubresource {
                    spec_replicas_path: ".spec.replicas",
                    status_replicas_path: ".status.replicas",
                    label_selector_path: ".status.selector",
                }),
            },
            deprecated: false,
            deprecation_warning: ::core::option::Option::None,
        };
        fn metadata(&self) -> &::apiforge_runtime::codegen::v1::ObjectMeta {
            &self.metadata
        }
        fn metadata_mut(&mut self) -> &mut ::apiforge_runtime::codegen::v1::ObjectMeta {
            &mut self.metadata
        }
        fn generated_validate(&self) -> ::apiforge_runtime::codegen::v1::ErrorList {
            ::apiforge_runtime::codegen::v1::validate_root(self)
        }
        fn generated_validate_update(
            &self,
            old: &Self,
        ) -> ::apiforge_runtime::codegen::v1::ErrorList {
            ::apiforge_runtime::codegen::v1::validate_update_root(self, old)
        }
        fn generated_default_fields(&mut self) {
            ::apiforge_runtime::codegen::v1::Validate::default_fields(self)
        }
        fn publish_schema(
            generator: &mut ::apiforge_runtime::codegen::v1::schemars::SchemaGenerator,
        ) {
            <Self as ::apiforge_runtime::codegen::v1::Validate>::publish_schema(
                generator,
            )
        }
    }
    #[automatically_derived]
    impl ::apiforge_runtime::codegen::v1::Strategy for Database {}
    ::apiforge_runtime::codegen::v1::kube_scope!(Database, namespaced);
    #[automatically_derived]
    impl ::apiforge_runtime::codegen::v1::Validate for Database {
        fn validate(
            &self,
            path: &::apiforge_runtime::codegen::v1::FieldPath,
        ) -> ::apiforge_runtime::codegen::v1::ErrorList {
            let mut errs = ::apiforge_runtime::codegen::v1::ErrorList::default();
            {
                let __path = path.child("metadata");
                let __field = &self.metadata;
                errs.extend(
                    (&::apiforge_runtime::codegen::v1::Probe(__field))
                        .__apiforge_validate(&__path),
                );
            }
            {
                let __path = path.child("spec");
                let __field = &self.spec;
                errs.extend(
                    (&::apiforge_runtime::codegen::v1::Probe(__field))
                        .__apiforge_validate(&__path),
                );
            }
            errs
        }
        fn validate_update(
            &self,
            old: &Self,
            path: &::apiforge_runtime::codegen::v1::FieldPath,
        ) -> ::apiforge_runtime::codegen::v1::ErrorList {
            let mut errs = ::apiforge_runtime::codegen::v1::ErrorList::default();
            {
                let __path = path.child("metadata");
                errs.extend(
                    (&::apiforge_runtime::codegen::v1::ProbePair(
                        &self.metadata,
                        &old.metadata,
                    ))
                        .__apiforge_validate_update(&__path),
                );
            }
            {
                let __path = path.child("spec");
                errs.extend(
                    (&::apiforge_runtime::codegen::v1::ProbePair(&self.spec, &old.spec))
                        .__apiforge_validate_update(&__path),
                );
            }
            errs
        }
        fn default_fields(&mut self) {
            (&mut ::apiforge_runtime::codegen::v1::ProbeMut(&mut self.metadata))
                .__apiforge_default();
            (&mut ::apiforge_runtime::codegen::v1::ProbeMut(&mut self.spec))
                .__apiforge_default();
        }
        fn publish_schema(
            generator: &mut ::apiforge_runtime::codegen::v1::schemars::SchemaGenerator,
        ) {
            let __schema = generator.subschema_for::<Self>();
            if let ::core::option::Option::Some(__publishing) = ::apiforge_runtime::codegen::v1::begin(
                &__schema,
            ) {
                if let ::core::option::Option::Some(__def) = ::apiforge_runtime::codegen::v1::definition(
                    generator,
                    &__publishing,
                ) {
                    let _ = &__def;
                }
                (&::apiforge_runtime::codegen::v1::ProbeType::<
                    ObjectMeta,
                >(::core::marker::PhantomData))
                    .__apiforge_publish(generator);
                (&::apiforge_runtime::codegen::v1::ProbeType::<
                    DatabaseSpec,
                >(::core::marker::PhantomData))
                    .__apiforge_publish(generator);
            }
        }
    }
    #[automatically_derived]
    impl Database {
        #[doc(hidden)]
        pub const __APIFORGE_TRANSITION_RULES: bool = {
            #[allow(unused_imports)]
            use ::apiforge_runtime::codegen::v1::NoTransitionRules as _;
            false || <ObjectMeta>::__APIFORGE_TRANSITION_RULES
                || <DatabaseSpec>::__APIFORGE_TRANSITION_RULES
        };
    }
    const _: () = {
        #[allow(unused_imports)]
        use ::apiforge_runtime::codegen::v1::NoTransitionRules as _;
    };
};
