//! `apiforge init DIR --group G --kind K`: a new cargo project that serves
//! one kind — the kind with spec, status, a validation rule and printer
//! columns, a `main` with the full command line, an in-process test that
//! uses the same type as a kube-rs client, an example object and a README.
//!
//! The project depends on apiforge by path when this binary was built from
//! a checkout that is still there (and then reuses its `Cargo.lock`, so a
//! build shares the checkout's compiled dependencies), else by version;
//! `--apiforge-path` and `--apiforge-version` choose explicitly.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// `apiforge init` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct InitOptions {
    /// The directory of the new project (created; must not exist or be
    /// empty). Its last component is the crate's name.
    pub(crate) dir: PathBuf,
    /// The API group, a DNS subdomain with at least one dot
    /// (e.g. `widgets.example.com`).
    #[arg(long)]
    pub(crate) group: String,
    /// The kind, in UpperCamelCase (e.g. `Widget`).
    #[arg(long)]
    pub(crate) kind: String,
    /// The API version.
    #[arg(long, default_value = "v1")]
    pub(crate) version: String,
    /// A namespaced kind (the default).
    #[arg(long, conflicts_with = "cluster")]
    pub(crate) namespaced: bool,
    /// A cluster-scoped kind.
    #[arg(long)]
    pub(crate) cluster: bool,
    /// Depend on the apiforge checkout at this path.
    #[arg(long, conflicts_with = "apiforge_version")]
    pub(crate) apiforge_path: Option<PathBuf>,
    /// Depend on this version of apiforge-runtime from crates.io.
    #[arg(long)]
    pub(crate) apiforge_version: Option<String>,
}

/// The checkout this binary was built from.
const CHECKOUT: &str = env!("CARGO_MANIFEST_DIR");

/// One file of the new project: its path inside it and its template.
const FILES: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("init/Cargo.toml.tmpl")),
    ("src/lib.rs", include_str!("init/lib.rs.tmpl")),
    ("src/main.rs", include_str!("init/main.rs.tmpl")),
    ("tests/{{plural}}.rs", include_str!("init/test.rs.tmpl")),
    ("{{plural}}.yaml", include_str!("init/example.yaml.tmpl")),
    ("README.md", include_str!("init/README.md.tmpl")),
    (".gitignore", "/target\n/.data\n"),
];

/// Creates the project and prints what to do next.
pub(crate) fn run(opts: &InitOptions) -> anyhow::Result<()> {
    let project = Project::new(opts)?;
    if opts.dir.exists()
        && std::fs::read_dir(&opts.dir)
            .with_context(|| format!("reading {}", opts.dir.display()))?
            .next()
            .is_some()
    {
        bail!("{} exists and is not empty", opts.dir.display());
    }
    for (path, template) in FILES {
        let file = opts.dir.join(project.render(path));
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&file, project.render(template))
            .with_context(|| format!("writing {}", file.display()))?;
    }
    if let Dependency::Path(checkout) = &project.apiforge {
        // The checkout's lock file: the same dependency versions, so a
        // build can reuse what the checkout compiled.
        let lock = checkout.join("Cargo.lock");
        if lock.is_file() {
            std::fs::copy(&lock, opts.dir.join("Cargo.lock"))
                .with_context(|| format!("copying {}", lock.display()))?;
        }
    }
    println!(
        "created {} ({} {}/{}, {})\n\nnext:\n  cd {}\n  cargo test\n  cargo run -- serve --data-dir .data\n  kubectl --kubeconfig .data/admin.kubeconfig apply -f {}.yaml",
        opts.dir.display(),
        project.kind,
        project.group,
        project.version,
        project.scope_words(),
        opts.dir.display(),
        project.plural,
    );
    Ok(())
}

/// Where the project gets apiforge from.
#[derive(Debug, Clone, PartialEq)]
enum Dependency {
    Path(PathBuf),
    Version(String),
}

/// The checked names of a new project.
#[derive(Debug)]
struct Project {
    crate_name: String,
    group: String,
    kind: String,
    version: String,
    plural: String,
    namespaced: bool,
    apiforge: Dependency,
}

impl Project {
    fn new(opts: &InitOptions) -> anyhow::Result<Self> {
        let name = opts
            .dir
            .file_name()
            .and_then(|n| n.to_str())
            .context("the project directory needs a name")?;
        let crate_name = crate_name(name)?;
        check_group(&opts.group)?;
        check_kind(&opts.kind)?;
        check_version(&opts.version)?;
        let apiforge = match (&opts.apiforge_path, &opts.apiforge_version) {
            (Some(path), _) => Dependency::Path(
                std::fs::canonicalize(path)
                    .with_context(|| format!("--apiforge-path {}", path.display()))?,
            ),
            (None, Some(version)) => Dependency::Version(version.clone()),
            (None, None) if Path::new(CHECKOUT).join("runtime/Cargo.toml").is_file() => {
                Dependency::Path(PathBuf::from(CHECKOUT))
            }
            (None, None) => Dependency::Version(env!("CARGO_PKG_VERSION").to_string()),
        };
        Ok(Self {
            crate_name,
            group: opts.group.clone(),
            plural: format!("{}s", opts.kind.to_lowercase()),
            kind: opts.kind.clone(),
            version: opts.version.clone(),
            namespaced: !opts.cluster,
            apiforge,
        })
    }

    fn scope_words(&self) -> &'static str {
        if self.namespaced {
            "namespaced"
        } else {
            "cluster-scoped"
        }
    }

    fn render(&self, template: &str) -> String {
        let dep = match &self.apiforge {
            Dependency::Path(p) => format!("path = {:?}", p.join("runtime").display().to_string()),
            Dependency::Version(v) => format!("version = {v:?}"),
        };
        template
            .replace("{{crate_name}}", &self.crate_name)
            .replace("{{lib_name}}", &self.crate_name.replace('-', "_"))
            .replace("{{group}}", &self.group)
            .replace("{{kind}}", &self.kind)
            .replace("{{version}}", &self.version)
            .replace("{{plural}}", &self.plural)
            .replace(
                "{{scope}}",
                if self.namespaced {
                    "namespaced"
                } else {
                    "cluster"
                },
            )
            .replace("{{scope_words}}", self.scope_words())
            .replace(
                "{{kube_api}}",
                if self.namespaced {
                    "Api::namespaced(server.client(), \"default\")"
                } else {
                    "Api::all(server.client())"
                },
            )
            .replace("{{apiforge_dep}}", &dep)
    }
}

/// A cargo package name from the directory's name.
fn crate_name(name: &str) -> anyhow::Result<String> {
    let ok = !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok {
        bail!(
            "{name:?} cannot name a crate: use lower-case letters, digits, '-' and '_', starting with a letter"
        );
    }
    Ok(name.to_string())
}

/// A group is a DNS-1123 subdomain with a dot, as a CRD's group must be.
fn check_group(group: &str) -> anyhow::Result<()> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if group.len() > 253 || !group.contains('.') || !group.split('.').all(label_ok) {
        bail!(
            "--group {group:?}: a group is a lower-case DNS subdomain with at least one dot, e.g. widgets.example.com"
        );
    }
    Ok(())
}

/// A kind is an UpperCamelCase Rust identifier.
fn check_kind(kind: &str) -> anyhow::Result<()> {
    if !kind.starts_with(|c: char| c.is_ascii_uppercase())
        || !kind.chars().all(|c| c.is_ascii_alphanumeric())
        || kind.len() > 63
    {
        bail!("--kind {kind:?}: a kind is UpperCamelCase ASCII letters and digits, e.g. Widget");
    }
    Ok(())
}

/// A version is Kubernetes' `v<N>[(alpha|beta)<M>]`.
fn check_version(version: &str) -> anyhow::Result<()> {
    let ok = (|| {
        let rest = version.strip_prefix('v')?;
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 || rest.starts_with('0') {
            return None;
        }
        let rest = &rest[digits..];
        if rest.is_empty() {
            return Some(());
        }
        let rest = rest
            .strip_prefix("alpha")
            .or_else(|| rest.strip_prefix("beta"))?;
        (!rest.is_empty() && !rest.starts_with('0') && rest.chars().all(|c| c.is_ascii_digit()))
            .then_some(())
    })();
    if ok.is_none() {
        bail!("--version {version:?}: a version is v1, v2, v1beta1, v1alpha2, ...");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(dir: &str) -> InitOptions {
        InitOptions {
            dir: PathBuf::from(dir),
            group: "widgets.example.com".into(),
            kind: "Widget".into(),
            version: "v1".into(),
            namespaced: false,
            cluster: false,
            apiforge_path: None,
            apiforge_version: Some("0.1.0".into()),
        }
    }

    /// The tutorial shows the generated kind as it is.
    #[test]
    fn the_tutorial_shows_the_generated_kind() {
        let tutorial = include_str!("../docs/guide/tutorial.md");
        let marker = "<!-- init: src/lib.rs";
        let after = &tutorial[tutorial.find(marker).expect("marker")..];
        let code = &after[after.find("```rust\n").expect("code block") + "```rust\n".len()..];
        let code = &code[..code.find("\n```").expect("end of block") + 1];
        let shown: String = code
            .lines()
            .filter(|l| !l.starts_with("# ") && *l != "#")
            .map(|l| format!("{l}\n"))
            .collect();
        let mut opts = options("/tmp/widgets");
        opts.apiforge_version = None;
        opts.apiforge_path = Some(PathBuf::from(CHECKOUT));
        let project = Project::new(&opts).expect("valid");
        assert_eq!(shown, project.render(FILES[1].1));
    }

    #[test]
    fn names_are_checked() {
        assert!(Project::new(&options("/tmp/widgets")).is_ok());
        assert!(Project::new(&options("/tmp/Widgets")).is_err());
        for group in ["widgets", "Widgets.example.com", "-a.example.com", "a..b"] {
            assert!(check_group(group).is_err(), "{group}");
        }
        for kind in ["widget", "Wid-get", ""] {
            assert!(check_kind(kind).is_err(), "{kind}");
        }
        for version in ["v1", "v2", "v1beta1", "v10alpha3"] {
            assert!(check_version(version).is_ok(), "{version}");
        }
        for version in ["1", "v0", "v01", "v1beta", "v1gamma1", "v1beta01", "V1"] {
            assert!(check_version(version).is_err(), "{version}");
        }
    }

    #[test]
    fn templates_leave_no_placeholder() {
        let project = Project::new(&options("/tmp/widgets")).expect("valid");
        for (path, template) in FILES {
            let text = project.render(template);
            assert!(!text.contains("{{"), "{path}: {text}");
            assert!(!project.render(path).contains("{{"), "{path}");
        }
        assert!(project.render("{{apiforge_dep}}") == "version = \"0.1.0\"");
        let mut cluster = options("/tmp/widgets");
        cluster.cluster = true;
        let project = Project::new(&cluster).expect("valid");
        assert!(project.render(FILES[1].1).contains("    cluster,\n"));
    }
}
