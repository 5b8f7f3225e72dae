//! The `continue` parameter of a list: any string a client sends is a
//! token for the collection or a 400, and a token read back re-encodes to
//! one that reads the same, inside the same collection.
#![no_main]

use apiforge_runtime::registry::continue_token;
use libfuzzer_sys::fuzz_target;

const PREFIX: &str = "/registry/configmaps/default/";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match continue_token::decode(text, PREFIX) {
        Ok(token) => {
            assert!(token.start.starts_with(PREFIX));
            assert!(!token.start[PREFIX.len()..].contains(".."));
            let again = continue_token::encode(token.revision, &token.start, PREFIX);
            assert_eq!(continue_token::decode(&again, PREFIX).ok(), Some(token));
        }
        Err(e) => assert_eq!(e.code(), 400),
    }
});
