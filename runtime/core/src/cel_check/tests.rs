use super::*;

fn env_with(object: Type) -> Env {
    let mut env = Env::new();
    env.declare("object", object);
    env
}

fn display(source: &str, env: &Env) -> String {
    check(crate::apiextensions::cel_env().parser(), source, env)
        .issues
        .display()
}

fn foo(t: Type) -> Type {
    Type::object("Deployment", vec![("foo", t)])
}

fn checks(source: &str, env: &Env) {
    let out = display(source, env);
    assert!(out.is_empty(), "{source}: {out}");
}

#[test]
fn undefined_field_with_caret() {
    assert_eq!(
        display(
            "object.foo == 'bar'",
            &env_with(Type::object("Deployment", vec![("bar", Type::String)]))
        ),
        "ERROR: <input>:1:7: undefined field 'foo'\n | object.foo == 'bar'\n | ......^"
    );
}

#[test]
fn overloads_of_operators() {
    let env = env_with(foo(Type::Int));
    assert_eq!(
        display("object.foo == 'bar'", &env),
        "ERROR: <input>:1:12: found no matching overload for '_==_' applied to '(int, string)'\n | object.foo == 'bar'\n | ...........^"
    );
    let env = env_with(foo(Type::String));
    assert_eq!(
        display("object.foo + 114514", &env),
        "ERROR: <input>:1:12: found no matching overload for '_+_' applied to '(string, int)'\n | object.foo + 114514\n | ...........^"
    );
    assert_eq!(
        display("object.foo > 1", &env),
        "ERROR: <input>:1:12: found no matching overload for '_>_' applied to '(string, int)'\n | object.foo > 1\n | ...........^"
    );
    // `==` is strict across numeric types; ordering is not.
    let env = env_with(foo(Type::Int));
    assert!(display("object.foo == 1.0", &env).contains("'(int, double)'"));
    checks("object.foo < 1.5 && object.foo >= 2u", &env);
    assert!(display("object.foo && true", &env).contains("'_&&_' applied to '(int, bool)'"));
    assert!(display("object.foo[0] == 1", &env).contains("'_[_]' applied to '(int, int)'"));
    assert!(display("'a' in object.foo", &env).contains("'@in' applied to '(string, int)'"));
    assert!(display("-object.foo == 'a'", &env).contains("'_==_' applied to '(int, string)'"));
}

#[test]
fn several_errors_sorted_and_joined() {
    let env = env_with(Type::object(
        "Deployment",
        vec![(
            "spec",
            Type::object("Deployment.spec", vec![("replicas", Type::Int)]),
        )],
    ));
    let src = "object.spec.replicas > '1' && object.spec.nonExisting == 1";
    assert_eq!(
        display(src, &env),
        format!(
            "ERROR: <input>:1:22: found no matching overload for '_>_' applied to '(int, string)'\n | {src}\n | {}^\nERROR: <input>:1:42: undefined field 'nonExisting'\n | {src}\n | {}^",
            ".".repeat(21),
            ".".repeat(41)
        )
    );
}

#[test]
fn errors_do_not_cascade() {
    let env = env_with(foo(Type::Int));
    // The undefined field makes `object.bar` an error: `== 'x'` adds none.
    let out = display("object.bar.baz == 'x' && object.bar > 1", &env);
    assert_eq!(out.matches("ERROR").count(), 2, "{out}");
    assert!(!out.contains("overload"), "{out}");
}

#[test]
fn undeclared_references() {
    let env = env_with(Type::Dyn);
    assert_eq!(
        display("params.x == 1", &env),
        "ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.x == 1\n | ^"
    );
    // Namespaced functions and type names are no references.
    checks(
        "optional.none().orValue(1) == 1 && type(object) == int",
        &env,
    );
}

#[test]
fn authorizer_receivers() {
    let mut env = Env::new();
    env.declare("authorizer", authorizer_type());
    checks(
        "authorizer.group('').resource('endpoints').check('create').allowed()",
        &env,
    );
    checks(
        "authorizer.path('/healthz').check('get').reason() == ''",
        &env,
    );
    checks(
        "authorizer.serviceAccount('ns', 'sa').group('').resource('pods').namespace('ns').name('x').check('get').errored()",
        &env,
    );
    assert_eq!(
        display("authorizer.allowed()", &env),
        "ERROR: <input>:1:19: found no matching overload for 'allowed' applied to 'kubernetes.authorization.Authorizer.()'\n | authorizer.allowed()\n | ..................^"
    );
}

#[test]
fn macros_and_comprehensions() {
    let item = Type::object(
        "Pod.spec.containers.@idx",
        vec![("name", Type::String), ("image", Type::String)],
    );
    let env = env_with(Type::object(
        "Pod",
        vec![
            ("containers", Type::list(item)),
            ("labels", Type::map(Type::String, Type::String)),
            ("count", Type::Int),
        ],
    ));
    checks("object.containers.all(c, c.image.startsWith('r/'))", &env);
    checks("object.containers.exists(c, c.name == 'x')", &env);
    checks("object.containers.exists_one(c, c.name == 'x')", &env);
    checks(
        "object.containers.map(c, c.name).all(n, n.size() < 10)",
        &env,
    );
    checks("object.containers.filter(c, c.name != '').size() > 0", &env);
    checks(
        "object.labels.all(k, k.startsWith('a') && object.labels[k] != '')",
        &env,
    );
    checks("has(object.labels.x) && has(object.count)", &env);
    // Items and keys are typed.
    let out = display("object.containers.all(c, c.nam == 'x')", &env);
    assert!(out.contains("1:27: undefined field 'nam'"), "{out}");
    let out = display("object.containers.map(c, c.name).exists(n, n == 1)", &env);
    assert!(out.contains("'_==_' applied to '(string, int)'"), "{out}");
    let out = display("object.containers.all(c, c.name)", &env);
    assert!(out.contains("'_&&_' applied to '(bool, string)'"), "{out}");
    let out = display("has(object.nope)", &env);
    assert_eq!(
        out,
        "ERROR: <input>:1:4: undefined field 'nope'\n | has(object.nope)\n | ...^"
    );
    let out = display("object.count.all(x, true)", &env);
    assert!(
        out.contains("expression of type 'int' cannot be range of a comprehension (must be list, map, or dynamic)"),
        "{out}"
    );
    let out = display("object.count.name == 'a'", &env);
    assert!(
        out.contains("type 'int' does not support field selection"),
        "{out}"
    );
}

#[test]
fn functions() {
    let env = env_with(Type::object(
        "Thing",
        vec![
            ("s", Type::String),
            ("n", Type::Int),
            ("l", Type::list(Type::Int)),
            ("t", Type::Timestamp),
        ],
    ));
    checks(
        "object.s.contains('a') && object.s.matches('^a') && size(object.s) > 1",
        &env,
    );
    checks(
        "object.s.lowerAscii().split(',').size() == object.l.size()",
        &env,
    );
    checks("object.l.sum() == object.n && object.l.isSorted()", &env);
    checks(
        "object.t < timestamp('2024-01-01T00:00:00Z') && object.t.getFullYear() > 2000",
        &env,
    );
    checks(
        "int(object.s) == object.n && string(object.n) == object.s",
        &env,
    );
    checks(
        "quantity(object.s).isGreaterThan(quantity('1')) && url(object.s).getHost() == ''",
        &env,
    );
    checks(
        "object.s.someFunctionNobodyKnows(1) == 2 && unknownGlobal(object.n)",
        &env,
    );
    let out = display("object.n.startsWith('a')", &env);
    assert!(
        out.contains("found no matching overload for 'startsWith' applied to 'int.(string)'"),
        "{out}"
    );
    let out = display("size(object.n) > 0", &env);
    assert!(out.contains("'size' applied to '(int)'"), "{out}");
    let out = display("object.t == 1", &env);
    assert!(out.contains("'(google.protobuf.Timestamp, int)'"), "{out}");
}

#[test]
fn unknowns_never_warn() {
    let env = env_with(Type::Dyn);
    checks("object.anything.goes[1].x == 'a' && object.y > 2", &env);
    let env = env_with(Type::object(
        "K",
        vec![("spec", Type::Dyn), ("o", Type::Opaque("x"))],
    ));
    checks(
        "object.spec.a.b == 1 && object.o.foo == 1 && object.o == null",
        &env,
    );
    // Objects compared with objects, maps or null: not modelled.
    checks(
        "object == oldObject || object != null || object.spec == {}",
        &{
            let mut e = env.clone();
            e.declare("oldObject", Type::object("Other", vec![]));
            e
        },
    );
}

#[test]
fn display_of_wide_characters_and_lines() {
    let env = env_with(foo(Type::Int));
    assert_eq!(
        display("'é' == object.foo", &env),
        "ERROR: <input>:1:5: found no matching overload for '_==_' applied to '(string, int)'\n | 'é' == object.foo\n | .\u{FF0E}..^"
    );
    assert_eq!(
        display("true &&\n\tobject.foo == 'a'", &env),
        "ERROR: <input>:2:13: found no matching overload for '_==_' applied to '(int, string)'\n |  object.foo == 'a'\n | ............^"
    );
}

#[test]
fn variable_types() {
    assert_eq!(
        Type::list(Type::object("X", vec![])).as_variable(),
        Type::list(Type::Dyn)
    );
    assert_eq!(
        Type::map(Type::String, Type::Int).as_variable(),
        Type::map(Type::String, Type::Int)
    );
    assert_eq!(Type::Optional(Box::new(Type::Int)).as_variable(), Type::Dyn);
}

#[test]
fn schemas_become_types() {
    let defs = serde_json::json!({
        "Meta": {"type": "object", "properties": {
            "name": {"type": "string"},
            "creationTimestamp": {"type": "string", "format": "date-time"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        }},
    });
    let defs = defs.as_object().cloned().unwrap_or_default();
    let root = serde_json::json!({"type": "object", "properties": {
        "metadata": {"allOf": [{"$ref": "#/components/schemas/Meta"}]},
        "spec": {"anyOf": [{"type": "object", "properties": {
            "replicas": {"type": ["integer", "null"], "format": "int32"},
            "port": {"x-kubernetes-int-or-string": true},
            "items": {"type": "array", "items": {"type": "object", "properties": {"a-b": {"type": "boolean"}}}},
            "noItems": {"type": "array"},
            "data": {"type": "string", "format": "byte"},
            "free": {},
            "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "in": {"type": "number"},
        }}, {"type": "null"}]},
    }});
    let Some(Type::Object(o)) = schema::from_openapi(&root, &defs, "Thing") else {
        panic!("object");
    };
    assert_eq!(o.name, "Thing");
    assert_eq!(o.fields["apiVersion"], Type::String);
    assert_eq!(o.fields["kind"], Type::String);
    let Type::Object(meta) = &o.fields["metadata"] else {
        panic!("meta");
    };
    assert_eq!(meta.name, "Thing.metadata");
    assert_eq!(meta.fields["creationTimestamp"], Type::Timestamp);
    assert_eq!(meta.fields["generateName"], Type::String);
    assert_eq!(meta.fields["labels"], Type::map(Type::String, Type::String));
    let Type::Object(spec) = &o.fields["spec"] else {
        panic!("spec");
    };
    assert_eq!(spec.fields["replicas"], Type::Int);
    assert_eq!(spec.fields["port"], Type::Dyn);
    assert_eq!(spec.fields["data"], Type::Bytes);
    assert_eq!(spec.fields["free"], Type::Dyn);
    assert_eq!(spec.fields["open"], Type::Dyn);
    assert_eq!(spec.fields["__in__"], Type::Double);
    // Reserved words are found by either name.
    let mut env = Env::new();
    env.declare("object", o.fields["spec"].clone());
    let parser = || crate::apiextensions::cel_env().parser();
    assert!(
        check(parser(), "object.__in__ > 1.0", &env)
            .issues
            .is_empty()
    );
    assert!(check(parser(), "object.in > 1.0", &env).issues.is_empty());
    assert!(!spec.fields.contains_key("noItems"));
    let Type::List(item) = &spec.fields["items"] else {
        panic!("items");
    };
    let Type::Object(item) = &**item else {
        panic!("item");
    };
    assert_eq!(item.name, "Thing.spec.items.@idx");
    assert_eq!(item.fields["a__dash__b"], Type::Bool);
    assert_eq!(schema::escape("a.b/c"), Some("a__dot__b__slash__c".into()));
    assert_eq!(schema::escape("x__y"), Some("x__underscores__y".into()));
    assert_eq!(schema::escape("1a"), None);
    assert_eq!(schema::escape("a b"), None);
}
