//! OpenAPI v3 documents of the compiled-in groups, one per group-version,
//! as kube-apiserver serves them under `/openapi/v3/apis/<group>/<version>`.
//!
//! Pure functions of the [`Scheme`]: `build.rs` calls them at build time and
//! the server serves the result from memory. [`v2`] merges them into the
//! Swagger 2.0 document of `/openapi/v2`.

pub mod v2;

use serde_json::{Map, Value, json};

use crate::resource::KindInfo;
use crate::scheme::{Group, Scheme};

/// Model names of the shared meta types.
const META_PREFIX: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.";

/// The OpenAPI v3 documents of every group-version, keyed by the index path
/// (`apis/<group>/<version>`, or `api/v1` for the core group).
pub fn v3_documents(scheme: &Scheme) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for group in scheme.groups() {
        for version in &group.versions {
            out.push((
                gv_path(group.name, version),
                group_version_document(group, version),
            ));
        }
    }
    out
}

/// `apis/<group>/<version>` or `api/<version>`.
pub fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn model_name(group: &Group, version: &str, local: &str) -> String {
    if local.contains('.') {
        return local.to_string();
    }
    if group.model_prefix.is_empty() {
        let mut parts: Vec<&str> = group.name.split('.').filter(|p| !p.is_empty()).collect();
        parts.reverse();
        format!("{}.{version}.{local}", parts.join("."))
    } else {
        format!("{}.{version}.{local}", group.model_prefix)
    }
}

/// Renames `#/components/schemas/<old>` references throughout a value.
fn rename_refs(value: &mut Value, rename: &dyn Fn(&str) -> String) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if k == "$ref" {
                    if let Value::String(s) = v
                        && let Some(name) = s.strip_prefix("#/components/schemas/")
                    {
                        *s = format!("#/components/schemas/{}", rename(name));
                    }
                } else {
                    rename_refs(v, rename);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rename_refs(v, rename)),
        _ => {}
    }
}

fn gvk(info: &KindInfo) -> Value {
    json!({"group": info.group, "kind": info.kind, "version": info.version})
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// The OpenAPI v3 document of one group-version.
pub fn group_version_document(group: &Group, version: &str) -> Value {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let mut kinds = Vec::new();
    for (kind, ops) in group.kinds_in(version) {
        let root = ops.schema(&mut generator);
        kinds.push((ops.info, root, kind.supports_strategic_merge_patch()));
    }
    if kinds
        .iter()
        .any(|(info, _, _)| info.subresources.scale.is_some())
    {
        generator.subschema_for::<crate::scale::Scale>();
    }
    let defs = generator.take_definitions(true);
    let rename = |name: &str| model_name(group, version, name);

    let mut schemas = Map::new();
    for (name, mut schema) in defs {
        rename_refs(&mut schema, &rename);
        schemas.insert(rename(&name), schema);
    }
    for (name, schema) in meta_schemas() {
        schemas.entry(name).or_insert(schema);
    }

    let mut paths = Map::new();
    for (info, root, strategic) in &kinds {
        let mut root = root.clone().to_value();
        rename_refs(&mut root, &rename);
        let kind_model = root
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
            .map(str::to_string)
            .unwrap_or_else(|| rename(info.kind));
        if let Some(Value::Object(schema)) = schemas.get_mut(&kind_model) {
            decorate_kind_schema(schema, info);
        }
        let list_model = format!("{kind_model}List");
        schemas.insert(list_model.clone(), list_schema(info, &kind_model));
        add_paths(&mut paths, info, (&kind_model, &list_model), *strategic);
    }

    json!({
        "openapi": "3.0.0",
        "info": {"title": if group.title.is_empty() { "Kubernetes" } else { group.title }, "version": "0.1"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

fn decorate_kind_schema(schema: &mut Map<String, Value>, info: &KindInfo) {
    let props = schema.entry("properties").or_insert_with(|| json!({}));
    if let Value::Object(props) = props {
        let mut ordered = Map::new();
        ordered.insert("apiVersion".into(), json!({"description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values.", "type": "string"}));
        ordered.insert("kind".into(), json!({"description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase.", "type": "string"}));
        for (k, v) in std::mem::take(props) {
            ordered.insert(k, v);
        }
        if let Some(Value::Object(meta)) = ordered.get_mut("metadata") {
            let reference = meta
                .remove("$ref")
                .unwrap_or_else(|| schema_ref(&format!("{META_PREFIX}ObjectMeta"))["$ref"].clone());
            meta.clear();
            meta.insert("allOf".into(), json!([{"$ref": reference}]));
            meta.insert("default".into(), json!({}));
            meta.insert("description".into(), json!("Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"));
        }
        *props = ordered;
    }
    schema.insert("x-kubernetes-group-version-kind".into(), json!([gvk(info)]));
}

fn list_schema(info: &KindInfo, kind_model: &str) -> Value {
    json!({
        "description": format!("{}List is a list of {} objects.", info.kind, info.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"description": "APIVersion defines the versioned schema of this representation of an object.", "type": "string"},
            "items": {"description": "Items is the list of objects.", "type": "array", "items": {"allOf": [schema_ref(kind_model)], "default": {}}},
            "kind": {"description": "Kind is a string value representing the REST resource this object represents.", "type": "string"},
            "metadata": {"allOf": [schema_ref(&format!("{META_PREFIX}ListMeta"))], "default": {}, "description": "Standard list metadata."},
        },
        "x-kubernetes-group-version-kind": [{"group": info.group, "kind": info.list_kind(), "version": info.version}],
    })
}

fn query_param(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": schema, "uniqueItems": true})
}

fn common_write_params(with_validation: bool) -> Vec<Value> {
    let mut out = vec![
        query_param(
            "dryRun",
            "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed",
            json!({"type": "string"}),
        ),
        query_param(
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
            json!({"type": "string"}),
        ),
    ];
    if with_validation {
        out.push(query_param("fieldValidation", "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict", json!({"type": "string"})));
    }
    out
}

fn list_params() -> Vec<Value> {
    vec![
        query_param(
            "allowWatchBookmarks",
            "allowWatchBookmarks requests watch events with type \"BOOKMARK\".",
            json!({"type": "boolean"}),
        ),
        query_param(
            "continue",
            "The continue option should be set when retrieving more results from the server.",
            json!({"type": "string"}),
        ),
        query_param(
            "fieldSelector",
            "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
            json!({"type": "string"}),
        ),
        query_param(
            "labelSelector",
            "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
            json!({"type": "string"}),
        ),
        query_param(
            "limit",
            "limit is a maximum number of responses to return for a list call.",
            json!({"type": "integer"}),
        ),
        query_param(
            "resourceVersion",
            "resourceVersion sets a constraint on what resource versions a request may be served from.",
            json!({"type": "string"}),
        ),
        query_param(
            "resourceVersionMatch",
            "resourceVersionMatch determines how resourceVersion is applied to list calls.",
            json!({"type": "string"}),
        ),
        query_param(
            "sendInitialEvents",
            "`sendInitialEvents=true` may be set together with `watch=true`.",
            json!({"type": "boolean"}),
        ),
        query_param(
            "timeoutSeconds",
            "Timeout for the list/watch call.",
            json!({"type": "integer"}),
        ),
        query_param(
            "watch",
            "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.",
            json!({"type": "boolean"}),
        ),
    ]
}

fn json_content(model: &str) -> Value {
    json!({
        "application/json": {"schema": schema_ref(model)},
        "application/yaml": {"schema": schema_ref(model)},
    })
}

fn operation(
    info: &KindInfo,
    action: &str,
    op_id: String,
    description: String,
    params: Vec<Value>,
    body: Option<Value>,
    responses: Value,
) -> Value {
    let mut op = json!({
        "tags": [format!("{}_{}", info.group, info.version)],
        "description": description,
        "operationId": op_id,
        "parameters": params,
        "responses": responses,
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(info),
    });
    if let (Some(body), Value::Object(map)) = (body, &mut op) {
        map.insert("requestBody".into(), body);
    }
    op
}

fn ok(model: &str) -> Value {
    json!({"description": "OK", "content": json_content(model)})
}

/// The paths of a kind; `strategic`: whether PATCH takes strategic merge
/// patches (not for custom resources; kubectl reads this to choose the
/// patch type of `apply`).
fn add_paths(
    paths: &mut Map<String, Value>,
    info: &KindInfo,
    (kind_model, list_model): (&str, &str),
    strategic: bool,
) {
    let base = if info.group.is_empty() {
        format!("/api/{}", info.version)
    } else {
        format!("/apis/{}/{}", info.group, info.version)
    };
    let camel = |verb: &str, namespaced: bool| {
        let v = info
            .version
            .chars()
            .next()
            .map(|c| c.to_ascii_uppercase())
            .into_iter()
            .chain(info.version.chars().skip(1))
            .collect::<String>();
        let g = info.group.split('.').next().unwrap_or("core");
        let mut g_camel: String = g
            .chars()
            .next()
            .map(|c| c.to_ascii_uppercase())
            .into_iter()
            .collect();
        g_camel.push_str(&g.chars().skip(1).collect::<String>());
        format!(
            "{verb}{g_camel}{v}{}{}",
            if namespaced { "Namespaced" } else { "" },
            info.kind
        )
    };
    let ns = info.namespaced();
    let collection = if ns {
        format!("{base}/namespaces/{{namespace}}/{}", info.plural)
    } else {
        format!("{base}/{}", info.plural)
    };
    let item = format!("{collection}/{{name}}");
    let status = format!("{}{}Status", META_PREFIX, "");
    let delete_options = format!("{META_PREFIX}DeleteOptions");
    let path_params = |with_name: bool| {
        let mut p = Vec::new();
        if with_name {
            p.push(json!({"name": "name", "in": "path", "description": format!("name of the {}", info.kind), "required": true, "schema": {"type": "string", "uniqueItems": true}}));
        }
        if ns {
            p.push(json!({"name": "namespace", "in": "path", "description": "object name and auth scope, such as for teams and projects", "required": true, "schema": {"type": "string", "uniqueItems": true}}));
        }
        p.push(query_param(
            "pretty",
            "If 'true', then the output is pretty printed.",
            json!({"type": "string"}),
        ));
        Value::Array(p)
    };
    let body =
        |model: &str| json!({"content": {"*/*": {"schema": schema_ref(model)}}, "required": true});
    let mut patch_body = json!({"content": {
        "application/apply-patch+yaml": {"schema": schema_ref(&format!("{META_PREFIX}Patch"))},
        "application/json-patch+json": {"schema": schema_ref(&format!("{META_PREFIX}Patch"))},
        "application/merge-patch+json": {"schema": schema_ref(&format!("{META_PREFIX}Patch"))},
        "application/strategic-merge-patch+json": {"schema": schema_ref(&format!("{META_PREFIX}Patch"))},
    }, "required": true});
    if !strategic && let Some(Value::Object(content)) = patch_body.get_mut("content") {
        content.shift_remove("application/strategic-merge-patch+json");
    }

    let mut coll = Map::new();
    coll.insert(
        "get".into(),
        operation(
            info,
            "list",
            camel("list", ns),
            format!("list or watch objects of kind {}", info.kind),
            list_params(),
            None,
            json!({"200": ok(list_model)}),
        ),
    );
    coll.insert("post".into(), operation(info, "post", camel("create", ns), format!("create a {}", info.kind), common_write_params(true), Some(body(kind_model)), json!({"200": ok(kind_model), "201": {"description": "Created", "content": json_content(kind_model)}, "202": {"description": "Accepted", "content": json_content(kind_model)}})));
    let mut dc_params = common_write_params(false);
    dc_params.extend(list_params());
    coll.insert(
        "delete".into(),
        operation(
            info,
            "deletecollection",
            camel("deletecollection", ns),
            format!("delete collection of {}", info.kind),
            dc_params,
            Some(body(&delete_options)),
            json!({"200": ok(&status)}),
        ),
    );
    coll.insert("parameters".into(), path_params(false));
    paths.insert(collection, Value::Object(coll));

    let mut it = Map::new();
    it.insert(
        "get".into(),
        operation(
            info,
            "get",
            camel("read", ns),
            format!("read the specified {}", info.kind),
            vec![],
            None,
            json!({"200": ok(kind_model)}),
        ),
    );
    it.insert("put".into(), operation(info, "put", camel("replace", ns), format!("replace the specified {}", info.kind), common_write_params(true), Some(body(kind_model)), json!({"200": ok(kind_model), "201": {"description": "Created", "content": json_content(kind_model)}})));
    let mut patch_params = common_write_params(true);
    patch_params.push(query_param(
        "force",
        "Force is going to \"force\" Apply requests.",
        json!({"type": "boolean"}),
    ));
    it.insert("patch".into(), operation(info, "patch", camel("patch", ns), format!("partially update the specified {}", info.kind), patch_params, Some(patch_body.clone()), json!({"200": ok(kind_model), "201": {"description": "Created", "content": json_content(kind_model)}})));
    let mut del_params = common_write_params(false);
    del_params.push(query_param(
        "gracePeriodSeconds",
        "The duration in seconds before the object should be deleted.",
        json!({"type": "integer"}),
    ));
    del_params.push(query_param(
        "propagationPolicy",
        "Whether and how garbage collection will be performed.",
        json!({"type": "string"}),
    ));
    it.insert("delete".into(), operation(info, "delete", camel("delete", ns), format!("delete a {}", info.kind), del_params, Some(body(&delete_options)), json!({"200": ok(&status), "202": {"description": "Accepted", "content": json_content(&status)}})));
    it.insert("parameters".into(), path_params(true));
    paths.insert(item.clone(), Value::Object(it));

    // `/status` and `/scale`: get, put, patch of the object's status (the
    // kind's model) or of its autoscaling/v1 Scale.
    let scale_gvk = json!({"group": crate::scale::SCALE_GROUP, "kind": "Scale", "version": crate::scale::SCALE_VERSION});
    let mut subresources = Vec::new();
    if info.subresources.status {
        subresources.push(("status", "Status", kind_model.to_string(), gvk(info)));
    }
    if info.subresources.scale.is_some() {
        subresources.push((
            "scale",
            "Scale",
            crate::scale::SCALE_MODEL.to_string(),
            scale_gvk,
        ));
    }
    for (sub, suffix, model, sub_gvk) in subresources {
        let op = |action: &str,
                  verb: &str,
                  what: &str,
                  params: Vec<Value>,
                  body: Option<Value>,
                  responses: Value| {
            let mut op = operation(
                info,
                action,
                format!("{}{suffix}", camel(verb, ns)),
                format!("{what} {sub} of the specified {}", info.kind),
                params,
                body,
                responses,
            );
            op["x-kubernetes-group-version-kind"] = sub_gvk.clone();
            op
        };
        let written = json!({"200": ok(&model), "201": {"description": "Created", "content": json_content(&model)}});
        let mut patch_params = common_write_params(true);
        patch_params.push(query_param(
            "force",
            "Force is going to \"force\" Apply requests.",
            json!({"type": "boolean"}),
        ));
        let mut p = Map::new();
        p.insert(
            "get".into(),
            op(
                "get",
                "read",
                "read",
                vec![],
                None,
                json!({"200": ok(&model)}),
            ),
        );
        p.insert(
            "put".into(),
            op(
                "put",
                "replace",
                "replace",
                common_write_params(true),
                Some(body(&model)),
                written.clone(),
            ),
        );
        p.insert(
            "patch".into(),
            op(
                "patch",
                "patch",
                "partially update",
                patch_params,
                Some(patch_body.clone()),
                written,
            ),
        );
        p.insert("parameters".into(), path_params(true));
        paths.insert(format!("{item}/{sub}"), Value::Object(p));
    }

    if ns {
        let all = format!("{base}/{}", info.plural);
        let mut a = Map::new();
        a.insert(
            "get".into(),
            operation(
                info,
                "list",
                camel("list", false).replace(info.kind, &format!("{}ForAllNamespaces", info.kind)),
                format!("list or watch objects of kind {}", info.kind),
                list_params(),
                None,
                json!({"200": ok(list_model)}),
            ),
        );
        a.insert(
            "parameters".into(),
            json!([query_param(
                "pretty",
                "If 'true', then the output is pretty printed.",
                json!({"type": "string"})
            )]),
        );
        paths.insert(all, Value::Object(a));
    }
}

/// Schemas of the meta types every document references.
fn meta_schemas() -> Vec<(String, Value)> {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    generator.subschema_for::<crate::meta::ObjectMeta>();
    generator.subschema_for::<crate::meta::ListMeta>();
    let mut out: Vec<(String, Value)> = generator.take_definitions(true).into_iter().collect();
    out.push((format!("{META_PREFIX}Status"), json!({
        "description": "Status is a return value for calls that don't return other objects.",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"}, "code": {"type": "integer", "format": "int32"},
            "details": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "kind": {"type": "string"}, "message": {"type": "string"},
            "metadata": {"allOf": [schema_ref(&format!("{META_PREFIX}ListMeta"))], "default": {}},
            "reason": {"type": "string"}, "status": {"type": "string"},
        },
        "x-kubernetes-group-version-kind": [{"group": "", "kind": "Status", "version": "v1"}],
    })));
    out.push((format!("{META_PREFIX}DeleteOptions"), json!({
        "description": "DeleteOptions may be provided when deleting an API object.",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "dryRun": {"type": "array", "items": {"type": "string", "default": ""}, "x-kubernetes-list-type": "atomic"},
            "gracePeriodSeconds": {"type": "integer", "format": "int64"},
            "kind": {"type": "string"},
            "preconditions": {"type": "object", "properties": {"resourceVersion": {"type": "string"}, "uid": {"type": "string"}}},
            "propagationPolicy": {"type": "string"},
        },
    })));
    out.push((format!("{META_PREFIX}Patch"), json!({
        "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.",
        "type": "object",
    })));
    out
}
