//! `--runtime-config` as kube-apiserver reads it: a list of
//! `<key>=<value>` where the key is `api/all`, `api/ga`, `api/beta`,
//! `api/alpha`, `api/legacy` (or `v1`, the core group) or `<group>/<version>`,
//! and the value `true`, `false` or empty (true). The broad keys apply
//! first, then the group versions named; a later entry wins over an earlier
//! one of the same key.
//!
//! Only turning group versions off means anything here (every compiled-in
//! group version is on by default). The group versions the server's own
//! controllers need (core `v1`, `rbac.authorization.k8s.io/v1`,
//! `coordination.k8s.io/v1`, `flowcontrol.apiserver.k8s.io/v1`,
//! `apiextensions.k8s.io/v1`, `admissionregistration.k8s.io/v1`,
//! `apiregistration.k8s.io/v1`, `discovery.k8s.io/v1`) stay on under the
//! broad keys, and naming one of them `=false` is an error.

use super::Scheme;

/// A `--runtime-config` entry that cannot be applied.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RuntimeConfigError {
    /// The value is not a boolean.
    #[error(
        "invalid value of {key}: {value}, err: strconv.ParseBool: parsing {value:?}: invalid syntax"
    )]
    Value {
        /// The key.
        key: String,
        /// The value given.
        value: String,
    },
    /// The key names no served group version.
    #[error("unknown api groupVersions: {0}")]
    Unknown(String),
    /// The key names a group version the server cannot do without.
    #[error("{0} cannot be disabled: the server's own controllers use it")]
    Required(String),
}

/// The group versions the server itself needs.
const REQUIRED: [(&str, &str); 8] = [
    ("", "v1"),
    ("rbac.authorization.k8s.io", "v1"),
    ("coordination.k8s.io", "v1"),
    ("flowcontrol.apiserver.k8s.io", "v1"),
    ("apiextensions.k8s.io", "v1"),
    ("admissionregistration.k8s.io", "v1"),
    ("apiregistration.k8s.io", "v1"),
    ("discovery.k8s.io", "v1"),
];

/// The stability level of a version name (`ga`, `beta`, `alpha`).
fn level(version: &str) -> &'static str {
    let rest = version.strip_prefix('v').unwrap_or(version);
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let tail = &rest[digits..];
    if tail.starts_with("alpha") {
        "alpha"
    } else if tail.starts_with("beta") {
        "beta"
    } else {
        "ga"
    }
}

impl Scheme {
    /// Applies `--runtime-config` entries (`key=value`); returns whether a
    /// group version was turned off.
    pub fn apply_runtime_config(&mut self, entries: &[String]) -> Result<bool, RuntimeConfigError> {
        let mut broad: Vec<(&str, bool)> = Vec::new();
        let mut specific: Vec<(String, String, bool)> = Vec::new();
        for entry in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            let (key, value) = entry.split_once('=').unwrap_or((entry, ""));
            let on = match value {
                "" | "true" | "1" | "t" | "T" | "TRUE" | "True" => true,
                "false" | "0" | "f" | "F" | "FALSE" | "False" => false,
                _ => {
                    return Err(RuntimeConfigError::Value {
                        key: key.into(),
                        value: value.into(),
                    });
                }
            };
            match key {
                "api/all" | "api/ga" | "api/beta" | "api/alpha" => {
                    broad.push((&key[4..], on));
                }
                "api/legacy" | "v1" | "api/v1" => specific.push((String::new(), "v1".into(), on)),
                _ => {
                    let parts: Vec<&str> = key.split('/').collect();
                    let [group, version] = parts.as_slice() else {
                        return Err(RuntimeConfigError::Unknown(key.into()));
                    };
                    if version.is_empty() || group.is_empty() {
                        return Err(RuntimeConfigError::Unknown(key.into()));
                    }
                    specific.push(((*group).into(), (*version).into(), on));
                }
            }
        }
        // Every served group version with its decided state.
        let mut state: Vec<(String, String, bool)> = self
            .groups
            .iter()
            .flat_map(|g| {
                g.versions
                    .iter()
                    .map(|v| (g.name.to_string(), v.to_string(), true))
            })
            .collect();
        for (which, on) in &broad {
            for (group, version, enabled) in &mut state {
                let required = REQUIRED.contains(&(group.as_str(), version.as_str()));
                if (*which == "all" || *which == level(version)) && !required {
                    *enabled = *on;
                }
            }
        }
        for (group, version, on) in &specific {
            let Some(entry) = state
                .iter_mut()
                .find(|(g, v, _)| g == group && v == version)
            else {
                return Err(RuntimeConfigError::Unknown(format!("{group}/{version}")));
            };
            if !on && REQUIRED.contains(&(group.as_str(), version.as_str())) {
                let name = if group.is_empty() {
                    version.clone()
                } else {
                    format!("{group}/{version}")
                };
                return Err(RuntimeConfigError::Required(name));
            }
            entry.2 = *on;
        }
        let mut changed = false;
        for (group, version, enabled) in state {
            if !enabled {
                changed |= self.disable_version(&group, &version);
            }
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheme::Group;

    fn scheme() -> Scheme {
        let mut s = Scheme::new();
        s.add_group(Group::new("", &["v1"]));
        s.add_group(Group::new("wardle.example.com", &["v1beta1", "v1alpha1"]));
        s.add_group(Group::new("extra.example.com", &["v1"]));
        s
    }

    fn versions(s: &Scheme) -> Vec<String> {
        s.groups()
            .iter()
            .flat_map(|g| g.versions.iter().map(move |v| format!("{}/{v}", g.name)))
            .collect()
    }

    #[test]
    fn group_versions_turn_off() {
        let mut s = scheme();
        assert!(
            s.apply_runtime_config(&["wardle.example.com/v1alpha1=false".into()])
                .unwrap()
        );
        assert_eq!(
            versions(&s),
            ["/v1", "wardle.example.com/v1beta1", "extra.example.com/v1"]
        );
        assert!(s.is_disabled("wardle.example.com", "v1alpha1"));
        let mut s = scheme();
        s.apply_runtime_config(&["api/all=false".into(), "extra.example.com/v1=true".into()])
            .unwrap();
        assert_eq!(versions(&s), ["/v1", "extra.example.com/v1"]);
        let mut s = scheme();
        s.apply_runtime_config(&["api/alpha=false".into()]).unwrap();
        assert_eq!(
            versions(&s),
            ["/v1", "wardle.example.com/v1beta1", "extra.example.com/v1"]
        );
    }

    #[test]
    fn bad_entries_are_refused() {
        let mut s = scheme();
        assert_eq!(
            s.apply_runtime_config(&["nope.example.com/v1=false".into()]),
            Err(RuntimeConfigError::Unknown("nope.example.com/v1".into()))
        );
        assert_eq!(
            s.apply_runtime_config(&["v1=false".into()]),
            Err(RuntimeConfigError::Required("v1".into()))
        );
        assert!(matches!(
            s.apply_runtime_config(&["api/all=maybe".into()]),
            Err(RuntimeConfigError::Value { .. })
        ));
        assert!(!s.apply_runtime_config(&["api/all=true".into()]).unwrap());
    }
}
