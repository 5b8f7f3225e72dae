const _: () = {
    #[automatically_derived]
    impl ::apiforge_runtime::codegen::v1::Convert<super::v1::Spec> for Spec {
        fn into_hub(self) -> super::v1::Spec {
            let __field2 = tier_into_hub(&self);
            super::v1::Spec {
                engine: ::apiforge_runtime::codegen::v1::Convert::into_hub(self.engine),
                storage_size: ::apiforge_runtime::codegen::v1::Convert::into_hub(
                    self.size,
                ),
                tier: __field2,
                ..::core::default::Default::default()
            }
        }
        fn from_hub(hub: &super::v1::Spec) -> Self {
            Spec {
                engine: ::apiforge_runtime::codegen::v1::Convert::from_hub(&hub.engine),
                size: ::apiforge_runtime::codegen::v1::Convert::from_hub(
                    &hub.storage_size,
                ),
                tier: tier_from_hub(hub),
                legacy: ::core::default::Default::default(),
            }
        }
    }
};
