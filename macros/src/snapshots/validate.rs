const _: () = {
    #[allow(unused_imports)]
    use ::apiforge_runtime::codegen::v1::{
        ViaDefault as _, ViaNothing as _, ViaNothingDefault as _, ViaNothingPublish as _,
        ViaNothingUpdate as _, ViaOption as _, ViaPublish as _, ViaValidate as _,
        ViaValidateUpdate as _, ViaValue as _,
    };
    #[automatically_derived]
    impl ::apiforge_runtime::codegen::v1::Validate for Spec {
        fn validate(
            &self,
            path: &::apiforge_runtime::codegen::v1::FieldPath,
        ) -> ::apiforge_runtime::codegen::v1::ErrorList {
            let mut errs = ::apiforge_runtime::codegen::v1::ErrorList::default();
            {
                let __path = path.child("minSize");
                let __field = &self.min_size;
                ::apiforge_runtime::codegen::v1::required(
                    &mut errs,
                    &__path,
                    ::apiforge_runtime::codegen::v1::IsSet::is_set(__field),
                );
                if let ::core::option::Option::Some(__v) = (&::apiforge_runtime::codegen::v1::Probe(
                    __field,
                ))
                    .__apiforge_get()
                {
                    ::apiforge_runtime::codegen::v1::minimum(
                        &mut errs,
                        &__path,
                        __v,
                        1f64,
                        false,
                    );
                    ::apiforge_runtime::codegen::v1::maximum(
                        &mut errs,
                        &__path,
                        __v,
                        5f64,
                        false,
                    );
                }
                errs.extend(
                    (&::apiforge_runtime::codegen::v1::Probe(__field))
                        .__apiforge_validate(&__path),
                );
            }
            {
                let __path = path.child("url");
                let __field = &self.url;
                if let ::core::option::Option::Some(__v) = (&::apiforge_runtime::codegen::v1::Probe(
                    __field,
                ))
                    .__apiforge_get()
                {
                    ::apiforge_runtime::codegen::v1::max_length(
                        &mut errs,
                        &__path,
                        ::core::convert::AsRef::<str>::as_ref(__v),
                        10usize,
                    );
                    {
                        static PATTERN: ::apiforge_runtime::codegen::v1::Pattern = ::apiforge_runtime::codegen::v1::Pattern::new(
                            "^[a-z]+$",
                        );
                        PATTERN
                            .check(
                                &mut errs,
                                &__path,
                                ::core::convert::AsRef::<str>::as_ref(__v),
                            );
                    }
                    {
                        static RULE: ::apiforge_runtime::codegen::v1::Rule = ::apiforge_runtime::codegen::v1::Rule::new(
                            "self != oldSelf",
                            "",
                        );
                        RULE.check(
                            &mut errs,
                            &__path,
                            &::apiforge_runtime::codegen::v1::to_json(__v),
                        );
                    }
                }
                errs.extend(
                    (&::apiforge_runtime::codegen::v1::Probe(__field))
                        .__apiforge_validate(&__path),
                );
            }
            {
                let __path = path.child("secretRef");
                let __field = &self.secret_ref;
                errs.extend(
                    (&::apiforge_runtime::codegen::v1::Probe(__field))
                        .__apiforge_validate(&__path),
                );
            }
            {
                let __path = path.child("ports");
                let __field = &self.ports;
                if let ::core::option::Option::Some(__v) = (&::apiforge_runtime::codegen::v1::Probe(
                    __field,
                ))
                    .__apiforge_get()
                {
                    ::apiforge_runtime::codegen::v1::unique_map_keys(
                        &mut errs,
                        &__path,
                        &__v[..],
                        &["name"],
                    );
                }
                errs.extend(
                    (&::apiforge_runtime::codegen::v1::Probe(__field))
                        .__apiforge_validate(&__path),
                );
            }
            {
                let __path = path.child("maxSize");
                let __field = &self.max_size;
                errs.extend(
                    (&::apiforge_runtime::codegen::v1::Probe(__field))
                        .__apiforge_validate(&__path),
                );
            }
            ::apiforge_runtime::codegen::v1::union(
                &mut errs,
                path,
                &[
                    ("url", ::apiforge_runtime::codegen::v1::IsSet::is_set(&self.url)),
                    (
                        "secretRef",
                        ::apiforge_runtime::codegen::v1::IsSet::is_set(&self.secret_ref),
                    ),
                ],
                true,
            );
            {
                static RULE: ::apiforge_runtime::codegen::v1::Rule = ::apiforge_runtime::codegen::v1::Rule::new(
                    "self.minSize <= self.maxSize",
                    "min over max",
                );
                RULE.check(
                    &mut errs,
                    path,
                    &::apiforge_runtime::codegen::v1::to_json(self),
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
                let __path = path.child("minSize");
                ::apiforge_runtime::codegen::v1::immutable(
                    &mut errs,
                    &__path,
                    &self.min_size,
                    &old.min_size,
                );
                errs.extend(
                    (&::apiforge_runtime::codegen::v1::ProbePair(
                        &self.min_size,
                        &old.min_size,
                    ))
                        .__apiforge_validate_update(&__path),
                );
            }
            {
                let __path = path.child("url");
                if let (
                    ::core::option::Option::Some(__v),
                    ::core::option::Option::Some(__o),
                ) = (
                    (&::apiforge_runtime::codegen::v1::Probe(&self.url))
                        .__apiforge_get(),
                    (&::apiforge_runtime::codegen::v1::Probe(&old.url)).__apiforge_get(),
                ) {
                    static RULE: ::apiforge_runtime::codegen::v1::Rule = ::apiforge_runtime::codegen::v1::Rule::new(
                        "self != oldSelf",
                        "",
                    );
                    RULE.check_update(
                        &mut errs,
                        &__path,
                        &::apiforge_runtime::codegen::v1::to_json(__v),
                        &::apiforge_runtime::codegen::v1::to_json(__o),
                    );
                }
                errs.extend(
                    (&::apiforge_runtime::codegen::v1::ProbePair(&self.url, &old.url))
                        .__apiforge_validate_update(&__path),
                );
            }
            {
                let __path = path.child("secretRef");
                errs.extend(
                    (&::apiforge_runtime::codegen::v1::ProbePair(
                        &self.secret_ref,
                        &old.secret_ref,
                    ))
                        .__apiforge_validate_update(&__path),
                );
            }
            {
                let __path = path.child("ports");
                errs.extend(
                    (&::apiforge_runtime::codegen::v1::ProbePair(
                        &self.ports,
                        &old.ports,
                    ))
                        .__apiforge_validate_update(&__path),
                );
            }
            {
                let __path = path.child("maxSize");
                errs.extend(
                    (&::apiforge_runtime::codegen::v1::ProbePair(
                        &self.max_size,
                        &old.max_size,
                    ))
                        .__apiforge_validate_update(&__path),
                );
            }
            errs
        }
        fn default_fields(&mut self) {
            if !::apiforge_runtime::codegen::v1::IsSet::is_set(&self.min_size) {
                self.min_size = ::core::option::Option::Some(
                    ::core::convert::Into::into(1),
                );
            }
            (&mut ::apiforge_runtime::codegen::v1::ProbeMut(&mut self.min_size))
                .__apiforge_default();
            (&mut ::apiforge_runtime::codegen::v1::ProbeMut(&mut self.url))
                .__apiforge_default();
            (&mut ::apiforge_runtime::codegen::v1::ProbeMut(&mut self.secret_ref))
                .__apiforge_default();
            (&mut ::apiforge_runtime::codegen::v1::ProbeMut(&mut self.ports))
                .__apiforge_default();
            (&mut ::apiforge_runtime::codegen::v1::ProbeMut(&mut self.max_size))
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
                    {
                        let mut __rules = ::apiforge_runtime::codegen::v1::serde_json::Map::new();
                        __rules
                            .insert(
                                "minimum".into(),
                                ::apiforge_runtime::codegen::v1::serde_json::json!(1i64),
                            );
                        __rules
                            .insert(
                                "maximum".into(),
                                ::apiforge_runtime::codegen::v1::serde_json::json!(5i64),
                            );
                        __rules
                            .insert(
                                "x-kubernetes-validations".into(),
                                ::apiforge_runtime::codegen::v1::serde_json::json!(
                                    [{ "rule" : "self == oldSelf", "message" :
                                    "field is immutable" }]
                                ),
                            );
                        let __default: Option<i32> = ::core::option::Option::Some(
                            ::core::convert::Into::into(1),
                        );
                        __rules
                            .insert(
                                "default".into(),
                                ::apiforge_runtime::codegen::v1::to_json(&__default),
                            );
                        ::apiforge_runtime::codegen::v1::merge_field(
                            __def,
                            "minSize",
                            ::apiforge_runtime::codegen::v1::serde_json::Value::Object(
                                __rules,
                            ),
                        );
                    }
                    ::apiforge_runtime::codegen::v1::set_required(
                        __def,
                        "minSize",
                        true,
                    );
                    {
                        let mut __rules = ::apiforge_runtime::codegen::v1::serde_json::Map::new();
                        __rules
                            .insert(
                                "maxLength".into(),
                                ::apiforge_runtime::codegen::v1::serde_json::json!(10usize),
                            );
                        __rules
                            .insert(
                                "pattern".into(),
                                ::apiforge_runtime::codegen::v1::serde_json::json!(
                                    "^[a-z]+$"
                                ),
                            );
                        __rules
                            .insert(
                                "x-kubernetes-validations".into(),
                                ::apiforge_runtime::codegen::v1::serde_json::json!(
                                    [{ "rule" : "self != oldSelf" }]
                                ),
                            );
                        ::apiforge_runtime::codegen::v1::merge_field(
                            __def,
                            "url",
                            ::apiforge_runtime::codegen::v1::serde_json::Value::Object(
                                __rules,
                            ),
                        );
                    }
                    {
                        let mut __rules = ::apiforge_runtime::codegen::v1::serde_json::Map::new();
                        __rules
                            .insert(
                                "x-kubernetes-list-type".into(),
                                ::apiforge_runtime::codegen::v1::serde_json::json!("map"),
                            );
                        __rules
                            .insert(
                                "x-kubernetes-list-map-keys".into(),
                                ::apiforge_runtime::codegen::v1::serde_json::json!(["name"]),
                            );
                        __rules
                            .insert(
                                "x-kubernetes-patch-strategy".into(),
                                ::apiforge_runtime::codegen::v1::serde_json::json!("merge"),
                            );
                        __rules
                            .insert(
                                "x-kubernetes-patch-merge-key".into(),
                                ::apiforge_runtime::codegen::v1::serde_json::json!("name"),
                            );
                        ::apiforge_runtime::codegen::v1::merge_field(
                            __def,
                            "ports",
                            ::apiforge_runtime::codegen::v1::serde_json::Value::Object(
                                __rules,
                            ),
                        );
                    }
                    ::apiforge_runtime::codegen::v1::merge_object(
                        __def,
                        ::apiforge_runtime::codegen::v1::serde_json::json!(
                            { "x-kubernetes-validations" :
                            ::apiforge_runtime::codegen::v1::union_rules(& [("url", <
                            Option < String > as ::apiforge_runtime::codegen::v1::IsSet >
                            ::cel_is_set("url")), ("secretRef", < Option < String > as
                            ::apiforge_runtime::codegen::v1::IsSet >
                            ::cel_is_set("secretRef"))], true) }
                        ),
                    );
                    ::apiforge_runtime::codegen::v1::merge_object(
                        __def,
                        ::apiforge_runtime::codegen::v1::serde_json::json!(
                            { "x-kubernetes-validations" : [{ "rule" :
                            "self.minSize <= self.maxSize", "message" : "min over max" }]
                            }
                        ),
                    );
                }
                (&::apiforge_runtime::codegen::v1::ProbeType::<
                    Option<i32>,
                >(::core::marker::PhantomData))
                    .__apiforge_publish(generator);
                (&::apiforge_runtime::codegen::v1::ProbeType::<
                    Option<String>,
                >(::core::marker::PhantomData))
                    .__apiforge_publish(generator);
                (&::apiforge_runtime::codegen::v1::ProbeType::<
                    Option<String>,
                >(::core::marker::PhantomData))
                    .__apiforge_publish(generator);
                (&::apiforge_runtime::codegen::v1::ProbeType::<
                    Vec<Port>,
                >(::core::marker::PhantomData))
                    .__apiforge_publish(generator);
                (&::apiforge_runtime::codegen::v1::ProbeType::<
                    Option<i32>,
                >(::core::marker::PhantomData))
                    .__apiforge_publish(generator);
            }
        }
    }
    #[automatically_derived]
    impl Spec {
        #[doc(hidden)]
        pub const __APIFORGE_TRANSITION_RULES: bool = {
            #[allow(unused_imports)]
            use ::apiforge_runtime::codegen::v1::NoTransitionRules as _;
            true || <i32>::__APIFORGE_TRANSITION_RULES
                || <String>::__APIFORGE_TRANSITION_RULES
                || <String>::__APIFORGE_TRANSITION_RULES
                || <Port>::__APIFORGE_TRANSITION_RULES
                || <i32>::__APIFORGE_TRANSITION_RULES
        };
    }
    const _: () = {
        #[allow(unused_imports)]
        use ::apiforge_runtime::codegen::v1::NoTransitionRules as _;
    };
};
