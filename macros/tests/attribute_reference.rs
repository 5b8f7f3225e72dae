//! The guide's attribute reference (`docs/guide/attributes.md`) is generated
//! from the derives' own documentation in `src/lib.rs`, and every key the
//! macros accept (the darling attribute structs in `src/attr.rs`) must be
//! documented there, so the reference cannot drift from the macros.
//!
//! Regenerate after changing the derives' docs:
//! `APIFORGE_UPDATE_DOCS=1 cargo test -p apiforge-macros --test attribute_reference`.

use std::path::{Path, PathBuf};

fn crate_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The text of the `#[doc = "..."]` attributes (`///` lines) of an item.
fn doc_text(attrs: &[syn::Attribute]) -> String {
    let mut lines = Vec::new();
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        if let syn::Meta::NameValue(nv) = &attr.meta
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
        {
            let line = s.value();
            // `/// text` gives " text": drop the one space rustdoc drops.
            lines.push(line.strip_prefix(' ').unwrap_or(&line).to_string());
        }
    }
    lines.join("\n")
}

/// The derives of `src/lib.rs` in source order: (derive name, its docs).
fn derives() -> Vec<(String, String)> {
    let file = syn::parse_file(&read(&crate_file("src/lib.rs"))).expect("src/lib.rs parses");
    let mut out = Vec::new();
    for item in file.items {
        let syn::Item::Fn(f) = item else { continue };
        for attr in &f.attrs {
            if attr.path().is_ident("proc_macro_derive") {
                let list = attr
                    .meta
                    .require_list()
                    .expect("proc_macro_derive(Name, ...)");
                let name = list
                    .tokens
                    .clone()
                    .into_iter()
                    .next()
                    .expect("a derive name")
                    .to_string();
                out.push((name, doc_text(&f.attrs)));
            }
        }
    }
    out
}

/// Turns one derive's rustdoc into a chapter section: code fences get the
/// `rust` language mdBook needs (with rustdoc's attributes kept), rustdoc
/// links to derives become links inside the chapter, headings move two
/// levels down.
fn section(name: &str, doc: &str) -> String {
    let mut out = format!("## `#[derive({name})]`\n\n");
    let mut in_code = false;
    for line in doc.lines() {
        if let Some(rest) = line.strip_prefix("```") {
            if in_code {
                in_code = false;
                out.push_str("```\n");
            } else {
                in_code = true;
                let attrs = rest.trim();
                if attrs.is_empty() || attrs == "rust" {
                    out.push_str("```rust\n");
                } else if attrs.starts_with("rust") {
                    out.push_str(&format!("```{attrs}\n"));
                } else {
                    out.push_str(&format!("```rust,{attrs}\n"));
                }
            }
            continue;
        }
        if in_code {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let mut text = line.to_string();
        if text.starts_with('#') {
            text = format!("##{text}");
        }
        // [`Validate`](derive@Validate) -> [`Validate`](#derivevalidate)
        while let Some(start) = text.find("(derive@") {
            let end = text[start..]
                .find(')')
                .map(|i| start + i)
                .expect("closed derive link");
            let target = text[start + "(derive@".len()..end].to_lowercase();
            text.replace_range(start..=end, &format!("(#derive{target})"));
        }
        out.push_str(&text);
        out.push('\n');
    }
    out.push('\n');
    out
}

fn reference() -> String {
    let mut out = String::from(
        "<!-- Generated from the derives' documentation in macros/src/lib.rs by\n     \
         `APIFORGE_UPDATE_DOCS=1 cargo test -p apiforge-macros --test attribute_reference`;\n     \
         edit the source, not this file. -->\n\n\
         # Macro attributes\n\n\
         Every attribute the derive macros accept, from the macros' own\n\
         documentation (the same text as `cargo doc -p apiforge-macros`). A test\n\
         regenerates this page and fails when it differs, and fails when the\n\
         macros accept a key this page does not mention. The samples are\n\
         compiled as doctests; the `compile_fail` ones must fail to compile.\n\n\
         An unknown key, a key given twice, a value of the wrong type or an\n\
         invalid value (a regular expression that does not compile, a JSON\n\
         path outside the type) is a compile error at the attribute.\n\n",
    );
    for (name, doc) in derives() {
        out.push_str(&section(&name, &doc));
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

#[test]
fn the_guide_reference_is_generated_from_the_macro_docs() {
    let path = crate_file("../docs/guide/attributes.md");
    let expected = reference();
    if std::env::var_os("APIFORGE_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &expected).expect("writing the reference");
        return;
    }
    let actual = read(&path);
    assert!(
        actual == expected,
        "{} is stale; regenerate it with \
         `APIFORGE_UPDATE_DOCS=1 cargo test -p apiforge-macros --test attribute_reference`",
        path.display()
    );
}

/// The keys of one darling struct: its named fields (darling's `rename`
/// applied), less the ones darling fills from the item itself.
fn keys_of(fields: &syn::Fields) -> Vec<String> {
    const FROM_ITEM: &[&str] = &["ident", "ty", "generics", "vis", "attrs", "data"];
    let mut keys = Vec::new();
    for field in fields {
        let Some(ident) = &field.ident else { continue };
        let mut key = ident.to_string();
        if FROM_ITEM.contains(&key.as_str()) {
            continue;
        }
        for attr in &field.attrs {
            if !attr.path().is_ident("darling") {
                continue;
            }
            let _ = attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("rename") {
                    let value: syn::LitStr = meta.value()?.parse()?;
                    key = value.value();
                } else if meta.input.peek(syn::Token![=]) {
                    let _: syn::Expr = meta.value()?.parse()?;
                }
                Ok(())
            });
        }
        keys.push(key);
    }
    keys
}

#[test]
fn every_key_the_macros_accept_is_documented_as_a_word() {
    let file = syn::parse_file(&read(&crate_file("src/attr.rs"))).expect("src/attr.rs parses");
    let reference = reference();
    let mut missing = Vec::new();
    let mut structs = 0;
    for item in file.items {
        let syn::Item::Struct(s) = item else { continue };
        let is_darling = s.attrs.iter().any(|a| {
            a.path().is_ident("derive")
                && a.meta
                    .require_list()
                    .is_ok_and(|l| l.tokens.to_string().contains("From"))
        });
        if !is_darling {
            continue;
        }
        structs += 1;
        for key in keys_of(&s.fields) {
            let word = |c: char| c.is_alphanumeric() || c == '_';
            let documented = reference.match_indices(key.as_str()).any(|(i, m)| {
                !reference[..i].chars().next_back().is_some_and(word)
                    && !reference[i + m.len()..].chars().next().is_some_and(word)
            });
            if !documented {
                missing.push(format!("{}::{key}", s.ident));
            }
        }
    }
    assert!(
        structs >= 5,
        "found only {structs} darling structs in src/attr.rs"
    );
    assert!(
        missing.is_empty(),
        "keys the macros accept but macros/src/lib.rs does not document: {missing:?}"
    );
}
