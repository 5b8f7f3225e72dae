//! Admission flags (`--enable-admission-plugins`,
//! `--disable-admission-plugins`, as kube-apiserver's) and the plugins
//! compiled into the binary.

use anyhow::Context;
use apiforge_runtime::admission::{AdmissionRegistry, Plugins};
use clap::Args;

/// The admission flags.
#[derive(Clone, Debug, Default, Args)]
pub(crate) struct AdmissionFlags {
    /// Admission plugins that should be enabled in addition to default enabled ones (NamespaceLifecycle, BanFlunder, MutatingAdmissionWebhook, ValidatingAdmissionPolicy, ValidatingAdmissionWebhook). Comma-delimited list of: NamespaceLifecycle, BanFlunder, MutatingAdmissionWebhook, ValidatingAdmissionPolicy, ValidatingAdmissionWebhook. The order of plugins in this flag does not matter.
    #[arg(long, value_delimiter = ',', help_heading = "Admission")]
    enable_admission_plugins: Vec<String>,
    /// Admission plugins that should be disabled although they are in the default enabled plugins list (NamespaceLifecycle, BanFlunder, MutatingAdmissionWebhook, ValidatingAdmissionPolicy, ValidatingAdmissionWebhook). Comma-delimited list of: NamespaceLifecycle, BanFlunder, MutatingAdmissionWebhook, ValidatingAdmissionPolicy, ValidatingAdmissionWebhook. The order of plugins in this flag does not matter.
    #[arg(long, value_delimiter = ',', help_heading = "Admission")]
    disable_admission_plugins: Vec<String>,
}

/// Every plugin the binary knows, in the order they run: the runtime's
/// built-ins, then each group's.
pub(crate) fn registry() -> AdmissionRegistry {
    let mut registry = AdmissionRegistry::with_builtins();
    registry.register(apiforge_apis::wardle::admission::ban_flunder(), true);
    registry
}

impl AdmissionFlags {
    /// The enabled plugins; unknown names are start-up errors.
    pub(crate) fn resolve(&self, registry: &AdmissionRegistry) -> anyhow::Result<Plugins> {
        registry
            .select(
                &self.enable_admission_plugins,
                &self.disable_admission_plugins,
            )
            .context("invalid admission options")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_unknown_names() {
        let r = registry();
        let on = AdmissionFlags::default().resolve(&r).unwrap();
        // The webhook and policy plugins stay last, after the group's BanFlunder.
        assert_eq!(
            on.names(),
            [
                "NamespaceLifecycle",
                "BanFlunder",
                "MutatingAdmissionWebhook",
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionWebhook"
            ]
        );
        let flags = AdmissionFlags {
            disable_admission_plugins: vec![
                "BanFlunder".into(),
                "MutatingAdmissionWebhook".into(),
                "ValidatingAdmissionPolicy".into(),
                "ValidatingAdmissionWebhook".into(),
            ],
            ..Default::default()
        };
        assert_eq!(flags.resolve(&r).unwrap().names(), ["NamespaceLifecycle"]);
        let flags = AdmissionFlags {
            enable_admission_plugins: vec!["Nope".into()],
            ..Default::default()
        };
        let err = format!("{:#}", flags.resolve(&r).unwrap_err());
        assert!(
            err.contains("enable-admission-plugins plugin \"Nope\" is unknown"),
            "{err}"
        );
    }
}
