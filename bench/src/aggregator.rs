//! The aggregator scenario: a GET of one 1 KiB Flunder through the
//! aggregator's proxy against the same GET served by the backend directly,
//! in one run. Server B serves wardle and trusts a front-proxy CA made
//! here; server A does not serve wardle (`--runtime-config`) and sends it to
//! B through an APIService (an `ExternalName` Service to 127.0.0.1,
//! `insecureSkipTLSVerify`: B's certificate is self-signed), presenting
//! the front-proxy client certificate. Throughput with 16 clients,
//! latency with 1 (the p50/p99 the proxy adds), and the CPU per GET of
//! both servers (A's and B's when proxied, B's when direct).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use serde_json::json;

use crate::client::{Conn, Target};
use crate::fixtures::{collection, flunder, pad_for_1kib};
use crate::load::{Op, median};
use crate::procs::{Apiforge, Backend};
use crate::report::{Figure, Target as Goal};
use crate::{Settings, progress};

/// GET of a fixed path; the response must be 2xx.
struct GetOp {
    path: String,
}

impl Op for GetOp {
    async fn call(&self, _worker: usize, conn: &mut Conn) -> anyhow::Result<u64> {
        Ok(conn.get(&self.path).await?.ok()?.len() as u64)
    }
}

/// Medians of the runs of one side.
#[derive(Default)]
struct Side {
    rate: Vec<f64>,
    p50: Vec<f64>,
    p99: Vec<f64>,
    cpu_us: Vec<f64>,
    /// The backend's CPU per request.
    backend_cpu_us: Vec<f64>,
}

/// Runs `op` with `clients` against `proxied` (the aggregator) and
/// `direct` (the backend) alternately, `settings.repeats` times after a
/// warm-up of each, reading both servers' CPU per request.
async fn alternate(
    settings: &Settings,
    label: &str,
    clients: usize,
    (proxied, pid): (&Target, &str),
    (direct, backend_pid): (&Target, &str),
    op: Arc<GetOp>,
) -> anyhow::Result<(Side, Side)> {
    crate::load::run(proxied, clients, settings.warmup, op.clone()).await?;
    crate::load::run(direct, clients, settings.warmup, op.clone()).await?;
    let (mut a, mut b) = (Side::default(), Side::default());
    for i in 0..settings.repeats {
        for (side, target) in [(&mut a, proxied), (&mut b, direct)] {
            let before = crate::procs::cpu_seconds(pid)?;
            let backend_before = crate::procs::cpu_seconds(backend_pid)?;
            let r = crate::load::run(target, clients, settings.run, op.clone()).await?;
            anyhow::ensure!(
                r.errors == 0 && r.requests > 0,
                "{label}: {} errors, first: {}",
                r.errors,
                r.first_error.as_deref().unwrap_or_default()
            );
            let used = crate::procs::cpu_seconds(pid)? - before;
            let backend_used = crate::procs::cpu_seconds(backend_pid)? - backend_before;
            side.rate.push(r.rate());
            side.p50.push(r.quantile_ms(0.5));
            side.p99.push(r.quantile_ms(0.99));
            side.cpu_us.push(used * 1e6 / r.requests as f64);
            side.backend_cpu_us
                .push(backend_used * 1e6 / r.requests as f64);
            progress!(
                "  {label} run {}/{}: {} {:.0} req/s, p99 {:.2} ms",
                i + 1,
                settings.repeats,
                if std::ptr::eq(target, proxied) {
                    "proxied"
                } else {
                    "direct"
                },
                r.rate(),
                r.quantile_ms(0.99)
            );
        }
    }
    Ok((a, b))
}

const S: &str = "aggregator";
/// Clients of the throughput runs.
const CLIENTS: usize = 16;

/// Writes a front-proxy CA and a `front-proxy-client` certificate into
/// `dir`: (CA, client certificate, client key).
fn front_proxy(dir: &std::path::Path) -> anyhow::Result<[std::path::PathBuf; 3]> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "bench-front-proxy-ca");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = KeyPair::generate()?;
    let mut client = CertificateParams::new(Vec::<String>::new())?;
    client
        .distinguished_name
        .push(DnType::CommonName, "front-proxy-client");
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = client.signed_by(&key, &issuer)?;
    let paths = [
        dir.join("front-proxy-ca.crt"),
        dir.join("proxy.crt"),
        dir.join("proxy.key"),
    ];
    std::fs::write(&paths[0], ca_cert.pem())?;
    std::fs::write(&paths[1], cert.pem())?;
    std::fs::write(&paths[2], key.serialize_pem())?;
    Ok(paths)
}

/// The scenario.
pub(crate) async fn aggregator(settings: &Settings) -> anyhow::Result<Vec<Figure>> {
    progress!("{S}: GET through the aggregator vs from the backend, 1 and {CLIENTS} clients");
    let tmp = tempfile::tempdir()?;
    let [ca, cert, key] = front_proxy(tmp.path())?;
    let path = |p: &std::path::Path| p.display().to_string();
    let b = Apiforge::start_with(
        &settings.binary,
        &tmp.path().join("b"),
        &Backend::Embedded,
        &[
            "--requestheader-client-ca-file".into(),
            path(&ca),
            "--requestheader-allowed-names=front-proxy-client".into(),
        ],
    )
    .await?;
    let a = Apiforge::start_with(
        &settings.binary,
        &tmp.path().join("a"),
        &Backend::Embedded,
        &[
            "--runtime-config=wardle.example.com/v1beta1=false,wardle.example.com/v1alpha1=false"
                .into(),
            "--proxy-client-cert-file".into(),
            path(&cert),
            "--proxy-client-key-file".into(),
            path(&key),
        ],
    )
    .await?;
    let pad = pad_for_1kib(&b.target, "default").await?;
    let mut on_b = Conn::connect(&b.target).await?;
    on_b.send(
        Method::POST,
        &collection("default"),
        Some(flunder("bench-get", pad, &[])),
    )
    .await?
    .ok()?;
    let mut on_a = Conn::connect(&a.target).await?;
    for (path, body) in [
        (
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench-system"}}),
        ),
        (
            "/api/v1/namespaces/bench-system/services",
            json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "wardle", "namespace": "bench-system"},
                "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}}),
        ),
        (
            "/apis/apiregistration.k8s.io/v1/apiservices",
            json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": "v1beta1.wardle.example.com"},
                "spec": {"group": "wardle.example.com", "version": "v1beta1",
                    "groupPriorityMinimum": 2000, "versionPriority": 200,
                    "insecureSkipTLSVerify": true,
                    "service": {"namespace": "bench-system", "name": "wardle",
                        "port": b.target.addr.port()}}}),
        ),
    ] {
        on_a.send(
            Method::POST,
            path,
            Some(Bytes::from(serde_json::to_vec(&body)?)),
        )
        .await?
        .ok()?;
    }
    let object = format!("{}/bench-get", collection("default"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let reply = on_a.get(&object).await?;
        if reply.status.is_success() {
            progress!("  proxied object is {} bytes", reply.body.len());
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the APIService did not become available in 60 s: {} {}",
            reply.status,
            String::from_utf8_lossy(&reply.body)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let op = Arc::new(GetOp { path: object });
    let a_pid = a.pid()?.to_string();
    let b_pid = b.pid()?.to_string();
    let (single_a, single_b) = alternate(
        settings,
        "aggregator-1",
        1,
        (&a.target, &a_pid),
        (&b.target, &b_pid),
        op.clone(),
    )
    .await?;
    let (many_a, many_b) = alternate(
        settings,
        "aggregator-16",
        CLIENTS,
        (&a.target, &a_pid),
        (&b.target, &b_pid),
        op,
    )
    .await?;
    let m = median;
    Ok(vec![
        Figure::vs(
            S,
            &format!("GET req/s through the proxy, {CLIENTS} clients (ref: backend directly)"),
            m(&many_a.rate),
            m(&many_b.rate),
            Goal::RatioAtLeast(0.5),
        ),
        Figure::new(
            S,
            "added p50 ms per GET through the proxy (1 client)",
            m(&single_a.p50) - m(&single_b.p50),
            Goal::Info,
        ),
        Figure::new(
            S,
            "added p99 ms per GET through the proxy (1 client)",
            m(&single_a.p99) - m(&single_b.p99),
            Goal::Info,
        ),
        Figure::vs(
            S,
            "p50 ms through the proxy, 1 client (ref: backend directly)",
            m(&single_a.p50),
            m(&single_b.p50),
            Goal::Info,
        ),
        Figure::new(
            S,
            &format!("aggregator CPU µs per proxied GET ({CLIENTS} clients)"),
            m(&many_a.cpu_us),
            Goal::Info,
        ),
        Figure::vs(
            S,
            &format!(
                "backend CPU µs per GET, proxied ({CLIENTS} clients; ref: the same GET sent directly)"
            ),
            m(&many_a.backend_cpu_us),
            m(&many_b.backend_cpu_us),
            Goal::Info,
        ),
        Figure::vs(
            S,
            &format!(
                "servers' CPU µs per GET, aggregator + backend ({CLIENTS} clients; ref: backend directly)"
            ),
            m(&many_a
                .cpu_us
                .iter()
                .zip(&many_a.backend_cpu_us)
                .map(|(a, b)| a + b)
                .collect::<Vec<_>>()),
            m(&many_b.backend_cpu_us),
            Goal::Info,
        ),
    ])
}
