//! Compile-fail tests: each bad or contradictory attribute fails with an
//! error at the attribute (`TRYBUILD=overwrite` re-blesses the `.stderr`).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/resource/*.rs");
    t.compile_fail("tests/ui/validate/*.rs");
    t.compile_fail("tests/ui/convert/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
