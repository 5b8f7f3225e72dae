//! The gnostic protobuf form of a Swagger 2.0 document
//! (`application/com.github.proto-openapi.spec.v2.v1.0+protobuf`), which
//! kube-apiserver serves at `/openapi/v2` and kubectl up to 1.28 asks for
//! before `create -f`, `apply -f` and `explain`.
//!
//! The messages are those of `openapi.v2` in google/gnostic-models
//! (`openapiv2/OpenAPIv2.proto`), declared here with prost's derive, with
//! the same field numbers. [`encode_document`] maps the JSON document onto
//! them the way gnostic's compiler does when kube-apiserver parses its own
//! JSON: JSON object order is kept, `x-` keys become `vendor_extension`
//! entries, and every free-form value (`default`, `example`, `enum` items,
//! vendor extension values) is an `Any` whose `yaml` field holds the value's
//! text (JSON, which every YAML parser reads as the same value). A
//! parameter is a body parameter for `in: body`, else the non-body variant
//! its `in` names; `$ref` parameters and responses are JSON references.

// The oneofs mirror gnostic's messages one to one (names and shapes), and a
// document is encoded once per process, so variant sizes do not matter.
#![allow(clippy::large_enum_variant, clippy::enum_variant_names)]

use prost::Message;
use serde_json::{Map, Value};

type Object = Map<String, Value>;

#[derive(Clone, PartialEq, Message)]
struct Document {
    #[prost(string, tag = "1")]
    swagger: String,
    #[prost(message, optional, tag = "2")]
    info: Option<Info>,
    #[prost(string, tag = "3")]
    host: String,
    #[prost(string, tag = "4")]
    base_path: String,
    #[prost(string, repeated, tag = "5")]
    schemes: Vec<String>,
    #[prost(string, repeated, tag = "6")]
    consumes: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    produces: Vec<String>,
    #[prost(message, optional, tag = "8")]
    paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    definitions: Option<Definitions>,
    #[prost(message, optional, tag = "10")]
    parameters: Option<ParameterDefinitions>,
    #[prost(message, optional, tag = "11")]
    responses: Option<ResponseDefinitions>,
    #[prost(message, repeated, tag = "12")]
    security: Vec<SecurityRequirement>,
    #[prost(message, optional, tag = "13")]
    security_definitions: Option<SecurityDefinitions>,
    #[prost(message, repeated, tag = "14")]
    tags: Vec<Tag>,
    #[prost(message, optional, tag = "15")]
    external_docs: Option<ExternalDocs>,
    #[prost(message, repeated, tag = "16")]
    vendor_extension: Vec<NamedAny>,
}

/// `Any`: only `yaml` (2) is ever set; `value` (1, a
/// `google.protobuf.Any`) stays empty, as gnostic leaves it.
#[derive(Clone, PartialEq, Message)]
struct Any {
    #[prost(string, tag = "2")]
    yaml: String,
}

#[derive(Clone, PartialEq, Message)]
struct NamedAny {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Any>,
}

#[derive(Clone, PartialEq, Message)]
struct Info {
    #[prost(string, tag = "1")]
    title: String,
    #[prost(string, tag = "2")]
    version: String,
    #[prost(string, tag = "3")]
    description: String,
    #[prost(string, tag = "4")]
    terms_of_service: String,
    #[prost(message, optional, tag = "5")]
    contact: Option<Contact>,
    #[prost(message, optional, tag = "6")]
    license: Option<License>,
    #[prost(message, repeated, tag = "7")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct Contact {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    url: String,
    #[prost(string, tag = "3")]
    email: String,
    #[prost(message, repeated, tag = "4")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct License {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    url: String,
    #[prost(message, repeated, tag = "3")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct ExternalDocs {
    #[prost(string, tag = "1")]
    description: String,
    #[prost(string, tag = "2")]
    url: String,
    #[prost(message, repeated, tag = "3")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct Tag {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    description: String,
    #[prost(message, optional, tag = "3")]
    external_docs: Option<ExternalDocs>,
    #[prost(message, repeated, tag = "4")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct Paths {
    #[prost(message, repeated, tag = "1")]
    vendor_extension: Vec<NamedAny>,
    #[prost(message, repeated, tag = "2")]
    path: Vec<NamedPathItem>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedPathItem {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<PathItem>,
}

#[derive(Clone, PartialEq, Message)]
struct PathItem {
    #[prost(string, tag = "1")]
    r#ref: String,
    #[prost(message, optional, tag = "2")]
    get: Option<Operation>,
    #[prost(message, optional, tag = "3")]
    put: Option<Operation>,
    #[prost(message, optional, tag = "4")]
    post: Option<Operation>,
    #[prost(message, optional, tag = "5")]
    delete: Option<Operation>,
    #[prost(message, optional, tag = "6")]
    options: Option<Operation>,
    #[prost(message, optional, tag = "7")]
    head: Option<Operation>,
    #[prost(message, optional, tag = "8")]
    patch: Option<Operation>,
    #[prost(message, repeated, tag = "9")]
    parameters: Vec<ParametersItem>,
    #[prost(message, repeated, tag = "10")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct Operation {
    #[prost(string, repeated, tag = "1")]
    tags: Vec<String>,
    #[prost(string, tag = "2")]
    summary: String,
    #[prost(string, tag = "3")]
    description: String,
    #[prost(message, optional, tag = "4")]
    external_docs: Option<ExternalDocs>,
    #[prost(string, tag = "5")]
    operation_id: String,
    #[prost(string, repeated, tag = "6")]
    produces: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    consumes: Vec<String>,
    #[prost(message, repeated, tag = "8")]
    parameters: Vec<ParametersItem>,
    #[prost(message, optional, tag = "9")]
    responses: Option<Responses>,
    #[prost(string, repeated, tag = "10")]
    schemes: Vec<String>,
    #[prost(bool, tag = "11")]
    deprecated: bool,
    #[prost(message, repeated, tag = "12")]
    security: Vec<SecurityRequirement>,
    #[prost(message, repeated, tag = "13")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct ParametersItem {
    #[prost(oneof = "ParametersItemOneof", tags = "1, 2")]
    oneof: Option<ParametersItemOneof>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum ParametersItemOneof {
    #[prost(message, tag = "1")]
    Parameter(Parameter),
    #[prost(message, tag = "2")]
    JsonReference(JsonReference),
}

#[derive(Clone, PartialEq, Message)]
struct JsonReference {
    #[prost(string, tag = "1")]
    r#ref: String,
    #[prost(string, tag = "2")]
    description: String,
}

#[derive(Clone, PartialEq, Message)]
struct Parameter {
    #[prost(oneof = "ParameterOneof", tags = "1, 2")]
    oneof: Option<ParameterOneof>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum ParameterOneof {
    #[prost(message, tag = "1")]
    BodyParameter(BodyParameter),
    #[prost(message, tag = "2")]
    NonBodyParameter(NonBodyParameter),
}

#[derive(Clone, PartialEq, Message)]
struct BodyParameter {
    #[prost(string, tag = "1")]
    description: String,
    #[prost(string, tag = "2")]
    name: String,
    #[prost(string, tag = "3")]
    r#in: String,
    #[prost(bool, tag = "4")]
    required: bool,
    #[prost(message, optional, tag = "5")]
    schema: Option<Schema>,
    #[prost(message, repeated, tag = "6")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct NonBodyParameter {
    #[prost(oneof = "NonBodyParameterOneof", tags = "1, 2, 3, 4")]
    oneof: Option<NonBodyParameterOneof>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum NonBodyParameterOneof {
    #[prost(message, tag = "1")]
    HeaderParameterSubSchema(HeaderParameterSubSchema),
    #[prost(message, tag = "2")]
    FormDataParameterSubSchema(FormDataParameterSubSchema),
    #[prost(message, tag = "3")]
    QueryParameterSubSchema(QueryParameterSubSchema),
    #[prost(message, tag = "4")]
    PathParameterSubSchema(PathParameterSubSchema),
}

/// Declares a non-body parameter message: the fields every one has, with
/// the tags given, plus `allow_empty_value` where the variant has it.
macro_rules! non_body_parameter {
    (
        $name:ident { $($allow:literal,)? required $t1:literal, in $t2:literal, description $t3:literal,
        name $t4:literal, type $t5:literal, format $t6:literal, items $t7:literal,
        collection_format $t8:literal, default $t9:literal, maximum $t10:literal,
        exclusive_maximum $t11:literal, minimum $t12:literal, exclusive_minimum $t13:literal,
        max_length $t14:literal, min_length $t15:literal, pattern $t16:literal,
        max_items $t17:literal, min_items $t18:literal, unique_items $t19:literal,
        enum $t20:literal, multiple_of $t21:literal, vendor_extension $t22:literal }
    ) => {
        #[derive(Clone, PartialEq, Message)]
        struct $name {
            #[prost(bool, tag = $t1)]
            required: bool,
            #[prost(string, tag = $t2)]
            r#in: String,
            #[prost(string, tag = $t3)]
            description: String,
            #[prost(string, tag = $t4)]
            name: String,
            $(
                #[prost(bool, tag = $allow)]
                allow_empty_value: bool,
            )?
            #[prost(string, tag = $t5)]
            r#type: String,
            #[prost(string, tag = $t6)]
            format: String,
            #[prost(message, optional, tag = $t7)]
            items: Option<PrimitivesItems>,
            #[prost(string, tag = $t8)]
            collection_format: String,
            #[prost(message, optional, tag = $t9)]
            default: Option<Any>,
            #[prost(double, tag = $t10)]
            maximum: f64,
            #[prost(bool, tag = $t11)]
            exclusive_maximum: bool,
            #[prost(double, tag = $t12)]
            minimum: f64,
            #[prost(bool, tag = $t13)]
            exclusive_minimum: bool,
            #[prost(int64, tag = $t14)]
            max_length: i64,
            #[prost(int64, tag = $t15)]
            min_length: i64,
            #[prost(string, tag = $t16)]
            pattern: String,
            #[prost(int64, tag = $t17)]
            max_items: i64,
            #[prost(int64, tag = $t18)]
            min_items: i64,
            #[prost(bool, tag = $t19)]
            unique_items: bool,
            #[prost(message, repeated, tag = $t20)]
            r#enum: Vec<Any>,
            #[prost(double, tag = $t21)]
            multiple_of: f64,
            #[prost(message, repeated, tag = $t22)]
            vendor_extension: Vec<NamedAny>,
        }
    };
}

non_body_parameter!(HeaderParameterSubSchema {
    required "1", in "2", description "3", name "4", type "5", format "6", items "7",
    collection_format "8", default "9", maximum "10", exclusive_maximum "11", minimum "12",
    exclusive_minimum "13", max_length "14", min_length "15", pattern "16", max_items "17",
    min_items "18", unique_items "19", enum "20", multiple_of "21", vendor_extension "22"
});
non_body_parameter!(PathParameterSubSchema {
    required "1", in "2", description "3", name "4", type "5", format "6", items "7",
    collection_format "8", default "9", maximum "10", exclusive_maximum "11", minimum "12",
    exclusive_minimum "13", max_length "14", min_length "15", pattern "16", max_items "17",
    min_items "18", unique_items "19", enum "20", multiple_of "21", vendor_extension "22"
});
non_body_parameter!(QueryParameterSubSchema {
    "5", required "1", in "2", description "3", name "4", type "6", format "7", items "8",
    collection_format "9", default "10", maximum "11", exclusive_maximum "12", minimum "13",
    exclusive_minimum "14", max_length "15", min_length "16", pattern "17", max_items "18",
    min_items "19", unique_items "20", enum "21", multiple_of "22", vendor_extension "23"
});
non_body_parameter!(FormDataParameterSubSchema {
    "5", required "1", in "2", description "3", name "4", type "6", format "7", items "8",
    collection_format "9", default "10", maximum "11", exclusive_maximum "12", minimum "13",
    exclusive_minimum "14", max_length "15", min_length "16", pattern "17", max_items "18",
    min_items "19", unique_items "20", enum "21", multiple_of "22", vendor_extension "23"
});

#[derive(Clone, PartialEq, Message)]
struct PrimitivesItems {
    #[prost(string, tag = "1")]
    r#type: String,
    #[prost(string, tag = "2")]
    format: String,
    #[prost(message, optional, boxed, tag = "3")]
    items: Option<Box<PrimitivesItems>>,
    #[prost(string, tag = "4")]
    collection_format: String,
    #[prost(message, optional, tag = "5")]
    default: Option<Any>,
    #[prost(double, tag = "6")]
    maximum: f64,
    #[prost(bool, tag = "7")]
    exclusive_maximum: bool,
    #[prost(double, tag = "8")]
    minimum: f64,
    #[prost(bool, tag = "9")]
    exclusive_minimum: bool,
    #[prost(int64, tag = "10")]
    max_length: i64,
    #[prost(int64, tag = "11")]
    min_length: i64,
    #[prost(string, tag = "12")]
    pattern: String,
    #[prost(int64, tag = "13")]
    max_items: i64,
    #[prost(int64, tag = "14")]
    min_items: i64,
    #[prost(bool, tag = "15")]
    unique_items: bool,
    #[prost(message, repeated, tag = "16")]
    r#enum: Vec<Any>,
    #[prost(double, tag = "17")]
    multiple_of: f64,
    #[prost(message, repeated, tag = "18")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct Responses {
    #[prost(message, repeated, tag = "1")]
    response_code: Vec<NamedResponseValue>,
    #[prost(message, repeated, tag = "2")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedResponseValue {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<ResponseValue>,
}

#[derive(Clone, PartialEq, Message)]
struct ResponseValue {
    #[prost(oneof = "ResponseValueOneof", tags = "1, 2")]
    oneof: Option<ResponseValueOneof>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum ResponseValueOneof {
    #[prost(message, tag = "1")]
    Response(Response),
    #[prost(message, tag = "2")]
    JsonReference(JsonReference),
}

#[derive(Clone, PartialEq, Message)]
struct Response {
    #[prost(string, tag = "1")]
    description: String,
    #[prost(message, optional, tag = "2")]
    schema: Option<SchemaItem>,
    #[prost(message, optional, tag = "3")]
    headers: Option<Headers>,
    #[prost(message, optional, tag = "4")]
    examples: Option<Examples>,
    #[prost(message, repeated, tag = "5")]
    vendor_extension: Vec<NamedAny>,
}

/// `SchemaItem`: gnostic tries `Schema` before `FileSchema`, and every
/// valid schema object matches the former, so only it is produced.
#[derive(Clone, PartialEq, Message)]
struct SchemaItem {
    #[prost(message, optional, tag = "1")]
    schema: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct Headers {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedHeader>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedHeader {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Header>,
}

#[derive(Clone, PartialEq, Message)]
struct Header {
    #[prost(string, tag = "1")]
    r#type: String,
    #[prost(string, tag = "2")]
    format: String,
    #[prost(message, optional, tag = "3")]
    items: Option<PrimitivesItems>,
    #[prost(string, tag = "4")]
    collection_format: String,
    #[prost(message, optional, tag = "5")]
    default: Option<Any>,
    #[prost(double, tag = "6")]
    maximum: f64,
    #[prost(bool, tag = "7")]
    exclusive_maximum: bool,
    #[prost(double, tag = "8")]
    minimum: f64,
    #[prost(bool, tag = "9")]
    exclusive_minimum: bool,
    #[prost(int64, tag = "10")]
    max_length: i64,
    #[prost(int64, tag = "11")]
    min_length: i64,
    #[prost(string, tag = "12")]
    pattern: String,
    #[prost(int64, tag = "13")]
    max_items: i64,
    #[prost(int64, tag = "14")]
    min_items: i64,
    #[prost(bool, tag = "15")]
    unique_items: bool,
    #[prost(message, repeated, tag = "16")]
    r#enum: Vec<Any>,
    #[prost(double, tag = "17")]
    multiple_of: f64,
    #[prost(string, tag = "18")]
    description: String,
    #[prost(message, repeated, tag = "19")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct Examples {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct Definitions {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedSchema {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct ParameterDefinitions {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedParameter>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedParameter {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Parameter>,
}

#[derive(Clone, PartialEq, Message)]
struct ResponseDefinitions {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedResponse>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedResponse {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Response>,
}

#[derive(Clone, PartialEq, Message)]
struct Schema {
    #[prost(string, tag = "1")]
    r#ref: String,
    #[prost(string, tag = "2")]
    format: String,
    #[prost(string, tag = "3")]
    title: String,
    #[prost(string, tag = "4")]
    description: String,
    #[prost(message, optional, tag = "5")]
    default: Option<Any>,
    #[prost(double, tag = "6")]
    multiple_of: f64,
    #[prost(double, tag = "7")]
    maximum: f64,
    #[prost(bool, tag = "8")]
    exclusive_maximum: bool,
    #[prost(double, tag = "9")]
    minimum: f64,
    #[prost(bool, tag = "10")]
    exclusive_minimum: bool,
    #[prost(int64, tag = "11")]
    max_length: i64,
    #[prost(int64, tag = "12")]
    min_length: i64,
    #[prost(string, tag = "13")]
    pattern: String,
    #[prost(int64, tag = "14")]
    max_items: i64,
    #[prost(int64, tag = "15")]
    min_items: i64,
    #[prost(bool, tag = "16")]
    unique_items: bool,
    #[prost(int64, tag = "17")]
    max_properties: i64,
    #[prost(int64, tag = "18")]
    min_properties: i64,
    #[prost(string, repeated, tag = "19")]
    required: Vec<String>,
    #[prost(message, repeated, tag = "20")]
    r#enum: Vec<Any>,
    #[prost(message, optional, boxed, tag = "21")]
    additional_properties: Option<Box<AdditionalPropertiesItem>>,
    #[prost(message, optional, tag = "22")]
    r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    items: Option<ItemsItem>,
    #[prost(message, repeated, tag = "24")]
    all_of: Vec<Schema>,
    #[prost(message, optional, tag = "25")]
    properties: Option<Properties>,
    #[prost(string, tag = "26")]
    discriminator: String,
    #[prost(bool, tag = "27")]
    read_only: bool,
    #[prost(message, optional, tag = "28")]
    xml: Option<Xml>,
    #[prost(message, optional, tag = "29")]
    external_docs: Option<ExternalDocs>,
    #[prost(message, optional, tag = "30")]
    example: Option<Any>,
    #[prost(message, repeated, tag = "31")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct AdditionalPropertiesItem {
    #[prost(oneof = "AdditionalPropertiesOneof", tags = "1, 2")]
    oneof: Option<AdditionalPropertiesOneof>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum AdditionalPropertiesOneof {
    #[prost(message, tag = "1")]
    Schema(Schema),
    #[prost(bool, tag = "2")]
    Boolean(bool),
}

#[derive(Clone, PartialEq, Message)]
struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    value: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    schema: Vec<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct Properties {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
struct Xml {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    namespace: String,
    #[prost(string, tag = "3")]
    prefix: String,
    #[prost(bool, tag = "4")]
    attribute: bool,
    #[prost(bool, tag = "5")]
    wrapped: bool,
    #[prost(message, repeated, tag = "6")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct SecurityRequirement {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedStringArray>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedStringArray {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<StringArray>,
}

#[derive(Clone, PartialEq, Message)]
struct StringArray {
    #[prost(string, repeated, tag = "1")]
    value: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct SecurityDefinitions {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSecurityDefinitionsItem>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedSecurityDefinitionsItem {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<SecurityDefinitionsItem>,
}

#[derive(Clone, PartialEq, Message)]
struct SecurityDefinitionsItem {
    #[prost(oneof = "SecurityDefinitionsOneof", tags = "1, 2, 3, 4, 5, 6")]
    oneof: Option<SecurityDefinitionsOneof>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum SecurityDefinitionsOneof {
    #[prost(message, tag = "1")]
    BasicAuthenticationSecurity(BasicAuthenticationSecurity),
    #[prost(message, tag = "2")]
    ApiKeySecurity(ApiKeySecurity),
    #[prost(message, tag = "3")]
    Oauth2ImplicitSecurity(Oauth2Security),
    #[prost(message, tag = "4")]
    Oauth2PasswordSecurity(Oauth2Security),
    #[prost(message, tag = "5")]
    Oauth2ApplicationSecurity(Oauth2Security),
    #[prost(message, tag = "6")]
    Oauth2AccessCodeSecurity(Oauth2AccessCodeSecurity),
}

#[derive(Clone, PartialEq, Message)]
struct BasicAuthenticationSecurity {
    #[prost(string, tag = "1")]
    r#type: String,
    #[prost(string, tag = "2")]
    description: String,
    #[prost(message, repeated, tag = "3")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct ApiKeySecurity {
    #[prost(string, tag = "1")]
    r#type: String,
    #[prost(string, tag = "2")]
    name: String,
    #[prost(string, tag = "3")]
    r#in: String,
    #[prost(string, tag = "4")]
    description: String,
    #[prost(message, repeated, tag = "5")]
    vendor_extension: Vec<NamedAny>,
}

/// The implicit, password and application OAuth2 flows: `type`, `flow`,
/// `scopes`, then one URL (`authorizationUrl` for implicit, `tokenUrl`
/// for the others) as field 4, `description` and vendor extensions.
#[derive(Clone, PartialEq, Message)]
struct Oauth2Security {
    #[prost(string, tag = "1")]
    r#type: String,
    #[prost(string, tag = "2")]
    flow: String,
    #[prost(message, optional, tag = "3")]
    scopes: Option<Oauth2Scopes>,
    #[prost(string, tag = "4")]
    url: String,
    #[prost(string, tag = "5")]
    description: String,
    #[prost(message, repeated, tag = "6")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct Oauth2AccessCodeSecurity {
    #[prost(string, tag = "1")]
    r#type: String,
    #[prost(string, tag = "2")]
    flow: String,
    #[prost(message, optional, tag = "3")]
    scopes: Option<Oauth2Scopes>,
    #[prost(string, tag = "4")]
    authorization_url: String,
    #[prost(string, tag = "5")]
    token_url: String,
    #[prost(string, tag = "6")]
    description: String,
    #[prost(message, repeated, tag = "7")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct Oauth2Scopes {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedString>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedString {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    value: String,
}

/// The gnostic protobuf encoding of a Swagger 2.0 JSON document.
pub fn encode_document(doc: &Value) -> Vec<u8> {
    let empty = Object::new();
    let o = doc.as_object().unwrap_or(&empty);
    Document {
        swagger: string(o, "swagger"),
        info: object(o, "info").map(info),
        host: string(o, "host"),
        base_path: string(o, "basePath"),
        schemes: strings(o, "schemes"),
        consumes: strings(o, "consumes"),
        produces: strings(o, "produces"),
        paths: object(o, "paths").map(|p| Paths {
            vendor_extension: extensions(p),
            path: p
                .iter()
                .filter(|(k, _)| k.starts_with('/'))
                .filter_map(|(k, v)| {
                    v.as_object().map(|v| NamedPathItem {
                        name: k.clone(),
                        value: Some(path_item(v)),
                    })
                })
                .collect(),
        }),
        definitions: object(o, "definitions").map(|d| Definitions {
            additional_properties: named_schemas(d),
        }),
        parameters: object(o, "parameters").map(|p| ParameterDefinitions {
            additional_properties: p
                .iter()
                .filter_map(|(k, v)| {
                    v.as_object().map(|v| NamedParameter {
                        name: k.clone(),
                        value: Some(parameter(v)),
                    })
                })
                .collect(),
        }),
        responses: object(o, "responses").map(|r| ResponseDefinitions {
            additional_properties: r
                .iter()
                .filter_map(|(k, v)| {
                    v.as_object().map(|v| NamedResponse {
                        name: k.clone(),
                        value: Some(response(v)),
                    })
                })
                .collect(),
        }),
        security: security_requirements(o),
        security_definitions: object(o, "securityDefinitions").map(|d| SecurityDefinitions {
            additional_properties: d
                .iter()
                .filter_map(|(k, v)| {
                    v.as_object().map(|v| NamedSecurityDefinitionsItem {
                        name: k.clone(),
                        value: Some(security_definition(v)),
                    })
                })
                .collect(),
        }),
        tags: objects(o, "tags")
            .map(|t| Tag {
                name: string(t, "name"),
                description: string(t, "description"),
                external_docs: object(t, "externalDocs").map(external_docs),
                vendor_extension: extensions(t),
            })
            .collect(),
        external_docs: object(o, "externalDocs").map(external_docs),
        vendor_extension: extensions(o),
    }
    .encode_to_vec()
}

fn object<'a>(o: &'a Object, key: &str) -> Option<&'a Object> {
    o.get(key).and_then(Value::as_object)
}

fn objects<'a>(o: &'a Object, key: &str) -> impl Iterator<Item = &'a Object> {
    o.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

fn string(o: &Object, key: &str) -> String {
    o.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn strings(o: &Object, key: &str) -> Vec<String> {
    match o.get(key) {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

fn boolean(o: &Object, key: &str) -> bool {
    o.get(key).and_then(Value::as_bool).unwrap_or_default()
}

fn double(o: &Object, key: &str) -> f64 {
    o.get(key).and_then(Value::as_f64).unwrap_or_default()
}

fn int(o: &Object, key: &str) -> i64 {
    o.get(key)
        .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
        .unwrap_or_default()
}

/// A free-form value: its text (JSON, read back as YAML by clients).
fn any(v: &Value) -> Any {
    let mut yaml = serde_json::to_string(v).unwrap_or_default();
    yaml.push('\n');
    Any { yaml }
}

fn any_at(o: &Object, key: &str) -> Option<Any> {
    o.get(key).map(any)
}

fn anys(o: &Object, key: &str) -> Vec<Any> {
    o.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().map(any).collect())
        .unwrap_or_default()
}

/// The `x-` keys of an object, in order.
fn extensions(o: &Object) -> Vec<NamedAny> {
    o.iter()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, v)| NamedAny {
            name: k.clone(),
            value: Some(any(v)),
        })
        .collect()
}

fn info(o: &Object) -> Info {
    Info {
        title: string(o, "title"),
        version: string(o, "version"),
        description: string(o, "description"),
        terms_of_service: string(o, "termsOfService"),
        contact: object(o, "contact").map(|c| Contact {
            name: string(c, "name"),
            url: string(c, "url"),
            email: string(c, "email"),
            vendor_extension: extensions(c),
        }),
        license: object(o, "license").map(|l| License {
            name: string(l, "name"),
            url: string(l, "url"),
            vendor_extension: extensions(l),
        }),
        vendor_extension: extensions(o),
    }
}

fn external_docs(o: &Object) -> ExternalDocs {
    ExternalDocs {
        description: string(o, "description"),
        url: string(o, "url"),
        vendor_extension: extensions(o),
    }
}

fn path_item(o: &Object) -> PathItem {
    let op = |method: &str| object(o, method).map(operation);
    PathItem {
        r#ref: string(o, "$ref"),
        get: op("get"),
        put: op("put"),
        post: op("post"),
        delete: op("delete"),
        options: op("options"),
        head: op("head"),
        patch: op("patch"),
        parameters: objects(o, "parameters").map(parameters_item).collect(),
        vendor_extension: extensions(o),
    }
}

fn operation(o: &Object) -> Operation {
    Operation {
        tags: strings(o, "tags"),
        summary: string(o, "summary"),
        description: string(o, "description"),
        external_docs: object(o, "externalDocs").map(external_docs),
        operation_id: string(o, "operationId"),
        produces: strings(o, "produces"),
        consumes: strings(o, "consumes"),
        parameters: objects(o, "parameters").map(parameters_item).collect(),
        responses: object(o, "responses").map(|r| Responses {
            response_code: r
                .iter()
                .filter(|(k, _)| !k.starts_with("x-"))
                .filter_map(|(k, v)| {
                    v.as_object().map(|v| NamedResponseValue {
                        name: k.clone(),
                        value: Some(ResponseValue {
                            oneof: Some(if v.contains_key("$ref") {
                                ResponseValueOneof::JsonReference(json_reference(v))
                            } else {
                                ResponseValueOneof::Response(response(v))
                            }),
                        }),
                    })
                })
                .collect(),
            vendor_extension: extensions(r),
        }),
        schemes: strings(o, "schemes"),
        deprecated: boolean(o, "deprecated"),
        security: security_requirements(o),
        vendor_extension: extensions(o),
    }
}

fn json_reference(o: &Object) -> JsonReference {
    JsonReference {
        r#ref: string(o, "$ref"),
        description: string(o, "description"),
    }
}

fn parameters_item(o: &Object) -> ParametersItem {
    ParametersItem {
        oneof: Some(if o.contains_key("$ref") {
            ParametersItemOneof::JsonReference(json_reference(o))
        } else {
            ParametersItemOneof::Parameter(parameter(o))
        }),
    }
}

/// Fills a non-body parameter message from its JSON object.
macro_rules! non_body {
    ($ty:ident, $o:expr $(, $extra:ident: $value:expr)?) => {{
        let o: &Object = $o;
        $ty {
            required: boolean(o, "required"),
            r#in: string(o, "in"),
            description: string(o, "description"),
            name: string(o, "name"),
            $($extra: $value,)?
            r#type: string(o, "type"),
            format: string(o, "format"),
            items: object(o, "items").map(primitives_items),
            collection_format: string(o, "collectionFormat"),
            default: any_at(o, "default"),
            maximum: double(o, "maximum"),
            exclusive_maximum: boolean(o, "exclusiveMaximum"),
            minimum: double(o, "minimum"),
            exclusive_minimum: boolean(o, "exclusiveMinimum"),
            max_length: int(o, "maxLength"),
            min_length: int(o, "minLength"),
            pattern: string(o, "pattern"),
            max_items: int(o, "maxItems"),
            min_items: int(o, "minItems"),
            unique_items: boolean(o, "uniqueItems"),
            r#enum: anys(o, "enum"),
            multiple_of: double(o, "multipleOf"),
            vendor_extension: extensions(o),
        }
    }};
}

fn parameter(o: &Object) -> Parameter {
    let non_body = |variant| {
        ParameterOneof::NonBodyParameter(NonBodyParameter {
            oneof: Some(variant),
        })
    };
    let oneof = match o.get("in").and_then(Value::as_str).unwrap_or_default() {
        "body" => ParameterOneof::BodyParameter(BodyParameter {
            description: string(o, "description"),
            name: string(o, "name"),
            r#in: string(o, "in"),
            required: boolean(o, "required"),
            schema: object(o, "schema").map(schema),
            vendor_extension: extensions(o),
        }),
        "header" => non_body(NonBodyParameterOneof::HeaderParameterSubSchema(non_body!(
            HeaderParameterSubSchema,
            o
        ))),
        "formData" => non_body(NonBodyParameterOneof::FormDataParameterSubSchema(
            non_body!(FormDataParameterSubSchema, o, allow_empty_value: boolean(o, "allowEmptyValue")),
        )),
        "path" => non_body(NonBodyParameterOneof::PathParameterSubSchema(non_body!(
            PathParameterSubSchema,
            o
        ))),
        _ => non_body(NonBodyParameterOneof::QueryParameterSubSchema(non_body!(
            QueryParameterSubSchema,
            o,
            allow_empty_value: boolean(o, "allowEmptyValue")
        ))),
    };
    Parameter { oneof: Some(oneof) }
}

fn primitives_items(o: &Object) -> PrimitivesItems {
    PrimitivesItems {
        r#type: string(o, "type"),
        format: string(o, "format"),
        items: object(o, "items").map(|i| Box::new(primitives_items(i))),
        collection_format: string(o, "collectionFormat"),
        default: any_at(o, "default"),
        maximum: double(o, "maximum"),
        exclusive_maximum: boolean(o, "exclusiveMaximum"),
        minimum: double(o, "minimum"),
        exclusive_minimum: boolean(o, "exclusiveMinimum"),
        max_length: int(o, "maxLength"),
        min_length: int(o, "minLength"),
        pattern: string(o, "pattern"),
        max_items: int(o, "maxItems"),
        min_items: int(o, "minItems"),
        unique_items: boolean(o, "uniqueItems"),
        r#enum: anys(o, "enum"),
        multiple_of: double(o, "multipleOf"),
        vendor_extension: extensions(o),
    }
}

fn response(o: &Object) -> Response {
    Response {
        description: string(o, "description"),
        schema: object(o, "schema").map(|s| SchemaItem {
            schema: Some(schema(s)),
        }),
        headers: object(o, "headers").map(|h| Headers {
            additional_properties: h
                .iter()
                .filter_map(|(k, v)| {
                    v.as_object().map(|v| NamedHeader {
                        name: k.clone(),
                        value: Some(header(v)),
                    })
                })
                .collect(),
        }),
        examples: object(o, "examples").map(|e| Examples {
            additional_properties: e
                .iter()
                .map(|(k, v)| NamedAny {
                    name: k.clone(),
                    value: Some(any(v)),
                })
                .collect(),
        }),
        vendor_extension: extensions(o),
    }
}

fn header(o: &Object) -> Header {
    Header {
        r#type: string(o, "type"),
        format: string(o, "format"),
        items: object(o, "items").map(primitives_items),
        collection_format: string(o, "collectionFormat"),
        default: any_at(o, "default"),
        maximum: double(o, "maximum"),
        exclusive_maximum: boolean(o, "exclusiveMaximum"),
        minimum: double(o, "minimum"),
        exclusive_minimum: boolean(o, "exclusiveMinimum"),
        max_length: int(o, "maxLength"),
        min_length: int(o, "minLength"),
        pattern: string(o, "pattern"),
        max_items: int(o, "maxItems"),
        min_items: int(o, "minItems"),
        unique_items: boolean(o, "uniqueItems"),
        r#enum: anys(o, "enum"),
        multiple_of: double(o, "multipleOf"),
        description: string(o, "description"),
        vendor_extension: extensions(o),
    }
}

fn named_schemas(o: &Object) -> Vec<NamedSchema> {
    o.iter()
        .filter_map(|(k, v)| {
            v.as_object().map(|v| NamedSchema {
                name: k.clone(),
                value: Some(schema(v)),
            })
        })
        .collect()
}

fn schema(o: &Object) -> Schema {
    Schema {
        r#ref: string(o, "$ref"),
        format: string(o, "format"),
        title: string(o, "title"),
        description: string(o, "description"),
        default: any_at(o, "default"),
        multiple_of: double(o, "multipleOf"),
        maximum: double(o, "maximum"),
        exclusive_maximum: boolean(o, "exclusiveMaximum"),
        minimum: double(o, "minimum"),
        exclusive_minimum: boolean(o, "exclusiveMinimum"),
        max_length: int(o, "maxLength"),
        min_length: int(o, "minLength"),
        pattern: string(o, "pattern"),
        max_items: int(o, "maxItems"),
        min_items: int(o, "minItems"),
        unique_items: boolean(o, "uniqueItems"),
        max_properties: int(o, "maxProperties"),
        min_properties: int(o, "minProperties"),
        required: strings(o, "required"),
        r#enum: anys(o, "enum"),
        additional_properties: match o.get("additionalProperties") {
            Some(Value::Bool(b)) => Some(AdditionalPropertiesOneof::Boolean(*b)),
            Some(Value::Object(s)) => Some(AdditionalPropertiesOneof::Schema(schema(s))),
            _ => None,
        }
        .map(|oneof| Box::new(AdditionalPropertiesItem { oneof: Some(oneof) })),
        r#type: o.get("type").map(|_| TypeItem {
            value: strings(o, "type"),
        }),
        items: match o.get("items") {
            Some(Value::Object(s)) => Some(ItemsItem {
                schema: vec![schema(s)],
            }),
            Some(Value::Array(a)) => Some(ItemsItem {
                schema: a.iter().filter_map(Value::as_object).map(schema).collect(),
            }),
            _ => None,
        },
        all_of: objects(o, "allOf").map(schema).collect(),
        properties: object(o, "properties").map(|p| Properties {
            additional_properties: named_schemas(p),
        }),
        discriminator: string(o, "discriminator"),
        read_only: boolean(o, "readOnly"),
        xml: object(o, "xml").map(|x| Xml {
            name: string(x, "name"),
            namespace: string(x, "namespace"),
            prefix: string(x, "prefix"),
            attribute: boolean(x, "attribute"),
            wrapped: boolean(x, "wrapped"),
            vendor_extension: extensions(x),
        }),
        external_docs: object(o, "externalDocs").map(external_docs),
        example: any_at(o, "example"),
        vendor_extension: extensions(o),
    }
}

fn security_requirements(o: &Object) -> Vec<SecurityRequirement> {
    objects(o, "security")
        .map(|r| SecurityRequirement {
            additional_properties: r
                .iter()
                .map(|(k, v)| NamedStringArray {
                    name: k.clone(),
                    value: Some(StringArray {
                        value: v
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect(),
                    }),
                })
                .collect(),
        })
        .collect()
}

fn security_definition(o: &Object) -> SecurityDefinitionsItem {
    let oauth2 = |url: &str| Oauth2Security {
        r#type: string(o, "type"),
        flow: string(o, "flow"),
        scopes: object(o, "scopes").map(scopes),
        url: string(o, url),
        description: string(o, "description"),
        vendor_extension: extensions(o),
    };
    let oneof = match (
        o.get("type").and_then(Value::as_str).unwrap_or_default(),
        o.get("flow").and_then(Value::as_str).unwrap_or_default(),
    ) {
        ("apiKey", _) => SecurityDefinitionsOneof::ApiKeySecurity(ApiKeySecurity {
            r#type: string(o, "type"),
            name: string(o, "name"),
            r#in: string(o, "in"),
            description: string(o, "description"),
            vendor_extension: extensions(o),
        }),
        ("oauth2", "implicit") => {
            SecurityDefinitionsOneof::Oauth2ImplicitSecurity(oauth2("authorizationUrl"))
        }
        ("oauth2", "password") => {
            SecurityDefinitionsOneof::Oauth2PasswordSecurity(oauth2("tokenUrl"))
        }
        ("oauth2", "application") => {
            SecurityDefinitionsOneof::Oauth2ApplicationSecurity(oauth2("tokenUrl"))
        }
        ("oauth2", _) => {
            SecurityDefinitionsOneof::Oauth2AccessCodeSecurity(Oauth2AccessCodeSecurity {
                r#type: string(o, "type"),
                flow: string(o, "flow"),
                scopes: object(o, "scopes").map(scopes),
                authorization_url: string(o, "authorizationUrl"),
                token_url: string(o, "tokenUrl"),
                description: string(o, "description"),
                vendor_extension: extensions(o),
            })
        }
        _ => SecurityDefinitionsOneof::BasicAuthenticationSecurity(BasicAuthenticationSecurity {
            r#type: string(o, "type"),
            description: string(o, "description"),
            vendor_extension: extensions(o),
        }),
    };
    SecurityDefinitionsItem { oneof: Some(oneof) }
}

fn scopes(o: &Object) -> Oauth2Scopes {
    Oauth2Scopes {
        additional_properties: o
            .iter()
            .filter(|(k, _)| !k.starts_with("x-"))
            .map(|(k, v)| NamedString {
                name: k.clone(),
                value: v.as_str().unwrap_or_default().to_string(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_definitions_paths_and_extensions() {
        let doc = serde_json::json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "paths": {
                "/apis/g/v1/things": {
                    "patch": {
                        "operationId": "patchThing",
                        "x-kubernetes-group-version-kind": {"group": "g", "kind": "Thing", "version": "v1"},
                        "parameters": [
                            {"name": "body", "in": "body", "required": true, "schema": {"$ref": "#/definitions/T"}},
                            {"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true},
                            {"name": "name", "in": "path", "required": true, "type": "string"},
                            {"$ref": "#/parameters/x"}
                        ],
                        "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/T"}}}
                    }
                }
            },
            "definitions": {
                "T": {
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "list": {"type": "array", "items": {"type": "string"}, "x-kubernetes-patch-strategy": "merge"},
                        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                        "size": {"type": "integer", "format": "int64", "minimum": 1, "maxLength": 3}
                    },
                    "x-kubernetes-group-version-kind": [{"group": "g", "kind": "Thing", "version": "v1"}]
                }
            },
            "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}},
            "security": [{"BearerToken": []}]
        });
        let bytes = encode_document(&doc);
        let decoded = Document::decode(bytes.as_slice()).expect("decodes");
        assert_eq!(decoded.swagger, "2.0");
        assert_eq!(
            decoded.info.as_ref().map(|i| i.title.as_str()),
            Some("Kubernetes")
        );

        let defs = decoded
            .definitions
            .expect("definitions")
            .additional_properties;
        assert_eq!(defs[0].name, "T");
        let t = defs[0].value.as_ref().expect("schema");
        assert_eq!(
            t.r#type.as_ref().map(|t| t.value.clone()),
            Some(vec!["object".to_string()])
        );
        assert_eq!(t.required, ["spec"]);
        let gvk = &t.vendor_extension[0];
        assert_eq!(gvk.name, "x-kubernetes-group-version-kind");
        let yaml = &gvk.value.as_ref().expect("value").yaml;
        let back: Value = serde_json::from_str(yaml).expect("JSON text");
        assert_eq!(back[0]["kind"], "Thing");
        let props = &t
            .properties
            .as_ref()
            .expect("properties")
            .additional_properties;
        let names: Vec<&str> = props.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["labels", "list", "mode", "size"]);
        let labels = props[0].value.as_ref().expect("labels");
        assert!(matches!(
            labels.additional_properties.as_deref(),
            Some(AdditionalPropertiesItem { oneof: Some(AdditionalPropertiesOneof::Schema(s)) })
                if s.r#type.as_ref().is_some_and(|t| t.value == ["string"])
        ));
        let list = props[1].value.as_ref().expect("list");
        assert_eq!(list.items.as_ref().map(|i| i.schema.len()), Some(1));
        assert_eq!(list.vendor_extension[0].name, "x-kubernetes-patch-strategy");
        let mode = props[2].value.as_ref().expect("mode");
        assert_eq!(mode.r#enum.len(), 2);
        assert_eq!(
            mode.default.as_ref().map(|d| d.yaml.as_str()),
            Some("\"a\"\n")
        );
        let size = props[3].value.as_ref().expect("size");
        assert_eq!((size.minimum, size.max_length), (1.0, 3));

        let paths = decoded.paths.expect("paths").path;
        assert_eq!(paths[0].name, "/apis/g/v1/things");
        let patch = paths[0]
            .value
            .as_ref()
            .and_then(|p| p.patch.as_ref())
            .expect("patch operation");
        assert_eq!(
            patch.vendor_extension[0].name,
            "x-kubernetes-group-version-kind"
        );
        let kinds: Vec<&str> = patch
            .parameters
            .iter()
            .map(|p| match &p.oneof {
                Some(ParametersItemOneof::Parameter(Parameter {
                    oneof: Some(ParameterOneof::BodyParameter(_)),
                })) => "body",
                Some(ParametersItemOneof::Parameter(Parameter {
                    oneof:
                        Some(ParameterOneof::NonBodyParameter(NonBodyParameter {
                            oneof: Some(NonBodyParameterOneof::QueryParameterSubSchema(q)),
                        })),
                })) if q.name == "fieldValidation" && q.unique_items => "query",
                Some(ParametersItemOneof::Parameter(Parameter {
                    oneof:
                        Some(ParameterOneof::NonBodyParameter(NonBodyParameter {
                            oneof: Some(NonBodyParameterOneof::PathParameterSubSchema(_)),
                        })),
                })) => "path",
                Some(ParametersItemOneof::JsonReference(r)) if r.r#ref == "#/parameters/x" => "ref",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["body", "query", "path", "ref"]);
        let responses = patch.responses.as_ref().expect("responses");
        assert_eq!(responses.response_code[0].name, "200");

        let sec = decoded.security_definitions.expect("security definitions");
        assert!(matches!(
            sec.additional_properties[0].value,
            Some(SecurityDefinitionsItem {
                oneof: Some(SecurityDefinitionsOneof::ApiKeySecurity(_))
            })
        ));
        assert_eq!(
            decoded.security[0].additional_properties[0].name,
            "BearerToken"
        );
    }
}
