//! Admission flags (`--enable-admission-plugins`,
//! `--disable-admission-plugins`, `--admission-control-config-file`, as
//! kube-apiserver's) and the plugins a program adds to the built-ins.

use anyhow::Context;
use std::path::PathBuf;

use crate::admission::config::AdmissionConfig;
use crate::admission::{AdmissionRegistry, Plugin, Plugins};
use clap::Args;
use std::sync::Arc;

/// The admission flags.
#[derive(Clone, Debug, Default, Args)]
pub(crate) struct AdmissionFlags {
    /// Admission plugins that should be enabled in addition to default enabled ones. Comma-delimited list of plugin names (the program's --help lists them). The order of plugins in this flag does not matter.
    #[arg(long, value_delimiter = ',', help_heading = "Admission")]
    enable_admission_plugins: Vec<String>,
    /// Admission plugins that should be disabled although they are in the default enabled plugins list. Comma-delimited list of plugin names (the program's --help lists them). The order of plugins in this flag does not matter.
    #[arg(long, value_delimiter = ',', help_heading = "Admission")]
    disable_admission_plugins: Vec<String>,
    /// File with admission control configuration (an AdmissionConfiguration; the webhook plugins read their client credentials kubeconfig, kubeConfigFile, from it).
    #[arg(long, help_heading = "Admission")]
    admission_control_config_file: Option<PathBuf>,
}

/// A plugin a program adds to the runtime's built-ins, and whether it runs
/// without being named in `--enable-admission-plugins`.
pub(crate) type ExtraPlugin = (Arc<dyn Plugin>, bool);

/// Every plugin the program knows, in the order they run: the runtime's
/// built-ins, then the program's own (the webhook plugins stay last).
pub(crate) fn registry(extra: &[ExtraPlugin]) -> AdmissionRegistry {
    with_extra(AdmissionRegistry::with_builtins(), extra)
}

fn with_extra(mut registry: AdmissionRegistry, extra: &[ExtraPlugin]) -> AdmissionRegistry {
    for (plugin, default_on) in extra {
        registry.register_arc(plugin.clone(), *default_on);
    }
    registry
}

/// kube-apiserver's help for `--enable-admission-plugins` and
/// `--disable-admission-plugins`, naming the plugins of `registry`.
pub(crate) fn help(registry: &AdmissionRegistry) -> (String, String) {
    let defaults = registry.defaults();
    let on = defaults.names().join(", ");
    let all = registry.names().join(", ");
    (
        format!(
            "Admission plugins that should be enabled in addition to default enabled ones ({on}). Comma-delimited list of: {all}. The order of plugins in this flag does not matter."
        ),
        format!(
            "Admission plugins that should be disabled although they are in the default enabled plugins list ({on}). Comma-delimited list of: {all}. The order of plugins in this flag does not matter."
        ),
    )
}

impl AdmissionFlags {
    /// The plugins, configured by `--admission-control-config-file`.
    pub(crate) fn registry(&self, extra: &[ExtraPlugin]) -> anyhow::Result<AdmissionRegistry> {
        let Some(path) = &self.admission_control_config_file else {
            return Ok(registry(extra));
        };
        let config = AdmissionConfig::load(path).context("invalid admission options")?;
        let builtins = AdmissionRegistry::with_builtins_configured(
            crate::admission::webhook::default_resolver(),
            &config,
        )
        .context("invalid admission options")?;
        Ok(with_extra(builtins, extra))
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

    /// A program's own plugin (as the apiforge binary's wardle BanFlunder).
    struct BanFlunder;

    #[async_trait::async_trait]
    impl Plugin for BanFlunder {
        fn name(&self) -> &str {
            "BanFlunder"
        }
    }

    #[test]
    fn defaults_and_unknown_names() {
        let r = registry(&[(Arc::new(BanFlunder), true)]);
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
