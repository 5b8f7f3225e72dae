//! Request paths and query strings, as the filter chain parses them.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (path, query) = text.split_once('?').unwrap_or((text, ""));
    for method in [http::Method::GET, http::Method::POST, http::Method::DELETE] {
        let _ = apiforge_runtime::request::info::parse(&method, path, query.contains("watch"));
    }
    let _ = apiforge_runtime::request::query::Query::parse(query);
});
