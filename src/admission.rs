//! Admission flags (`--enable-admission-plugins`,
//! `--disable-admission-plugins`, `--admission-control-config-file`, as
//! kube-apiserver's) and the plugins compiled into the binary.

use anyhow::Context;
use std::path::PathBuf;

use apiforge_runtime::admission::config::AdmissionConfig;
use apiforge_runtime::admission::{AdmissionRegistry, Plugins};
use clap::Args;

/// The admission flags.
#[derive(Clone, Debug, Default, Args)]
pub(crate) struct AdmissionFlags {
    /// Admission plugins that should be enabled in addition to default enabled ones (NamespaceLifecycle, BanFlunder, MutatingAdmissionPolicy, MutatingAdmissionWebhook, ValidatingAdmissionPolicy, ValidatingAdmissionWebhook). Comma-delimited list of: NamespaceLifecycle, BanFlunder, MutatingAdmissionPolicy, MutatingAdmissionWebhook, ValidatingAdmissionPolicy, ValidatingAdmissionWebhook. The order of plugins in this flag does not matter.
    #[arg(long, value_delimiter = ',', help_heading = "Admission")]
    enable_admission_plugins: Vec<String>,
    /// Admission plugins that should be disabled although they are in the default enabled plugins list (NamespaceLifecycle, BanFlunder, MutatingAdmissionPolicy, MutatingAdmissionWebhook, ValidatingAdmissionPolicy, ValidatingAdmissionWebhook). Comma-delimited list of: NamespaceLifecycle, BanFlunder, MutatingAdmissionPolicy, MutatingAdmissionWebhook, ValidatingAdmissionPolicy, ValidatingAdmissionWebhook. The order of plugins in this flag does not matter.
    #[arg(long, value_delimiter = ',', help_heading = "Admission")]
    disable_admission_plugins: Vec<String>,
    /// File with admission control configuration (an AdmissionConfiguration; the webhook plugins read their client credentials kubeconfig, kubeConfigFile, from it).
    #[arg(long, help_heading = "Admission")]
    admission_control_config_file: Option<PathBuf>,
}

/// Every plugin the binary knows, in the order they run: the runtime's
/// built-ins, then each group's (the webhook plugins stay last).
pub(crate) fn registry() -> AdmissionRegistry {
    with_groups(AdmissionRegistry::with_builtins())
}

fn with_groups(mut registry: AdmissionRegistry) -> AdmissionRegistry {
    registry.register(apiforge_apis::wardle::admission::ban_flunder(), true);
    registry
}

impl AdmissionFlags {
    /// The plugins, configured by `--admission-control-config-file`.
    pub(crate) fn registry(&self) -> anyhow::Result<AdmissionRegistry> {
        let Some(path) = &self.admission_control_config_file else {
            return Ok(registry());
        };
        let config = AdmissionConfig::load(path).context("invalid admission options")?;
        let builtins = AdmissionRegistry::with_builtins_configured(
            apiforge_runtime::admission::webhook::default_resolver(),
            &config,
        )
        .context("invalid admission options")?;
        Ok(with_groups(builtins))
    }

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
                "MutatingAdmissionPolicy",
                "MutatingAdmissionWebhook",
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionWebhook"
            ]
        );
        let flags = AdmissionFlags {
            disable_admission_plugins: vec![
                "BanFlunder".into(),
                "MutatingAdmissionPolicy".into(),
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
