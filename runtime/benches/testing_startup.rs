//! Start-up time of the in-process test server (`apiforge_runtime::testing`):
//! from `TestServer::start` until `/readyz` answers, for the runtime's
//! built-in scheme: the first start of the process (which also generates
//! the scheme's documents) and the later ones. `cargo bench -p apiforge-runtime --features testing
//! --bench testing_startup` (ROUNDS=<n> for more rounds).

use std::time::Duration;

use apiforge_runtime::scheme::Scheme;
use apiforge_runtime::testing::TestServer;

fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(20);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut times: Vec<Duration> = runtime.block_on(async {
        let mut times = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let mut scheme = Scheme::new();
            apiforge_runtime::builtin::install(&mut scheme);
            let server = TestServer::start(scheme).await.expect("start");
            times.push(server.startup_time());
            server.stop().await.expect("stop");
        }
        times
    });
    // The first start of a process also generates the scheme's OpenAPI
    // and discovery documents (cached for the later ones).
    let first = times[0];
    let mut later = times.split_off(1);
    later.sort();
    if later.is_empty() {
        println!("testing::TestServer::start (1 round): first {first:?}");
        return;
    }
    let median = later[later.len() / 2];
    let max = later[later.len() - 1];
    println!(
        "testing::TestServer::start ({rounds} rounds): first {first:?}; later: min {:?}, median {median:?}, max {max:?}",
        later[0]
    );
}
