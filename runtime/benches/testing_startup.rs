//! Start-up time of the in-process test server (`apiforge_runtime::testing`):
//! from `TestServer::start` until `/readyz` answers, for the runtime's
//! built-in scheme. `cargo bench -p apiforge-runtime --features testing
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
    times.sort();
    let median = times[times.len() / 2];
    let max = times[times.len() - 1];
    println!(
        "testing::TestServer::start ({rounds} rounds): min {:?}, median {median:?}, max {max:?}",
        times[0]
    );
}
