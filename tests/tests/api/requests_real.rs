//! Issue #54, the request node's half, over real targets written here: a log-in whose cookie the next request
//! carries (and not with the jar off), a form post, a 5 MiB multipart upload read back by a real multipart parser
//! (multer), `duration` with `lessThan`, `matchesSchema` against the Petstore description's `Pet`, 400s for bad
//! shapes (GraphQL against a real GraphQL server: requests_graphql.rs); and through the real server and a real
//! `hookflow-runner`: a client certificate from a secret against an OpenSSL server requiring one (refused without
//! it, and refused when the secret's `allowed_hosts` leave the host out), through an HTTPS proxy written here that
//! sees the CONNECT.

use crate::RUNNER;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::{get, post};
use base64::Engine as _;
use hookflow_runner::engine::{Engine, Outcome};
use hookflow_shared::api::executions::{NodeResult, NodeStatus};
use hookflow_shared::api::resources::PutSecret;
use hookflow_shared::api::runners::{FinalStatus, Job};
use hookflow_tests::TestApp;
use hookflow_tests::runner::RunnerProcess;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The session cookie the log-in target sets: it must never show in results.
const COOKIE: &str = "sess-7f3a9c0e51d2b8a4";
/// A password with every character a form must encode.
const PASSWORD: &str = "p@ss w&rd=é+%";

#[derive(Debug, Clone)]
struct Part {
    name: String,
    filename: Option<String>,
    content_type: Option<String>,
    bytes: Vec<u8>,
}

/// What the target received.
#[derive(Debug, Default)]
struct Seen {
    form: Vec<(String, String)>,
    parts: Vec<Part>,
}

type Shared = Arc<Mutex<Seen>>;

async fn login(State(seen): State<Shared>, headers: HeaderMap, body: Bytes) -> (StatusCode, HeaderMap, String) {
    let form: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
    let urlencoded = headers.get(header::CONTENT_TYPE).is_some_and(|c| c == "application/x-www-form-urlencoded");
    seen.lock().expect("seen").form.clone_from(&form);
    let mut out = HeaderMap::new();
    let expected = [("user".to_owned(), "ada".to_owned()), ("password".to_owned(), PASSWORD.to_owned())];
    if !urlencoded || form != expected {
        return (StatusCode::BAD_REQUEST, out, "bad form".into());
    }
    out.insert(header::SET_COOKIE, format!("sid={COOKIE}; Path=/; HttpOnly").parse().expect("header"));
    out.append(header::SET_COOKIE, "theme=dark; Path=/account".parse().expect("header"));
    (StatusCode::OK, out, "{\"ok\": true}".into())
}

async fn me(headers: HeaderMap) -> (StatusCode, String) {
    let cookie = headers.get(header::COOKIE).and_then(|c| c.to_str().ok()).unwrap_or_default();
    if cookie.split("; ").any(|pair| pair == format!("sid={COOKIE}")) && !cookie.contains("theme") {
        (StatusCode::OK, "{\"user\": \"ada\"}".into())
    } else {
        (StatusCode::UNAUTHORIZED, "{\"error\": \"log in first\"}".into())
    }
}

async fn upload(State(seen): State<Shared>, headers: HeaderMap, body: Bytes) -> (StatusCode, String) {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|c| c.to_str().ok()).unwrap_or_default();
    let Ok(boundary) = multer::parse_boundary(content_type) else {
        return (StatusCode::BAD_REQUEST, "no boundary".into());
    };
    let stream = futures_util::stream::once(async move { Ok::<Bytes, std::io::Error>(body) });
    let mut multipart = multer::Multipart::new(stream, boundary);
    let mut parts = Vec::new();
    while let Ok(Some(field)) = multipart.next_field().await {
        let name = field.name().unwrap_or_default().to_owned();
        let filename = field.file_name().map(str::to_owned);
        let content_type = field.content_type().map(ToString::to_string);
        let Ok(bytes) = field.bytes().await else { return (StatusCode::BAD_REQUEST, "a part broke".into()) };
        parts.push(Part { name, filename, content_type, bytes: bytes.to_vec() });
    }
    let count = parts.len();
    seen.lock().expect("seen").parts = parts;
    (StatusCode::OK, format!("{{\"parts\": {count}}}"))
}

async fn slow(Query(query): Query<BTreeMap<String, u64>>) -> &'static str {
    tokio::time::sleep(Duration::from_millis(query.get("ms").copied().unwrap_or(0))).await;
    "{}"
}

async fn pet(axum::extract::Path(kind): axum::extract::Path<String>) -> String {
    match kind.as_str() {
        "good" => json!({"id": 1, "name": "Rex", "tag": "dog"}),
        _ => json!({"id": "one", "name": "Rex"}),
    }
    .to_string()
}

async fn target() -> (String, Shared) {
    let seen = Shared::default();
    let app = Router::new()
        .route("/login", post(login))
        .route("/me", get(me))
        .route("/upload", post(upload))
        .route("/slow", get(slow))
        .route("/pet/{kind}", get(pet))
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, seen)
}

async fn run(definition: Value) -> (Outcome, Vec<NodeResult>) {
    let (sink, mut results) = tokio::sync::mpsc::unbounded_channel();
    let job = Job::standalone("requests", definition, 60);
    let outcome = Engine::new().run(&job, &sink, &CancellationToken::new()).await;
    drop(sink);
    let mut all = Vec::new();
    while let Some(result) = results.recv().await {
        all.push(result);
    }
    (outcome, all)
}

fn status_is(code: u16) -> Value {
    json!({"source": "code", "operator": "equals", "expected": code})
}

fn log_in_then_me(base: &str) -> Value {
    json!({"nodes": [
        {"id": "login", "kind": "request",
         "request": {"method": "POST", "url": format!("{base}/login"),
                     "form": [["user", "ada"], ["password", "{{password}}"]]},
         "extractors": [{"name": "code", "kind": "statusCode"}], "assertions": [status_is(200)]},
        {"id": "me", "kind": "request", "request": {"method": "GET", "url": format!("{base}/me")},
         "extractors": [{"name": "code", "kind": "statusCode"}], "assertions": [status_is(200)]}
    ], "variables": {"password": PASSWORD}})
}

#[tokio::test]
async fn a_login_cookie_goes_with_the_next_request_unless_the_jar_is_off() {
    let (base, seen) = target().await;
    let (outcome, results) = run(log_in_then_me(&base)).await;
    assert_eq!(outcome.status, FinalStatus::Succeeded, "{outcome:?} {results:?}");
    let form = seen.lock().expect("seen").form.clone();
    assert_eq!(form, [("user".to_owned(), "ada".to_owned()), ("password".to_owned(), PASSWORD.to_owned())]);
    let login = &results[0];
    assert_eq!(
        login.request.as_ref().and_then(|r| r.body.as_deref()),
        Some("user=ada&password=p%40ss+w%26rd%3D%C3%A9%2B%25"),
        "the form as sent"
    );
    let shown = serde_json::to_string(&results).expect("json");
    assert!(!shown.contains(COOKIE), "the cookie's value is masked in results: {shown}");
    let set_cookie = &login.response.as_ref().expect("response").headers["set-cookie"];
    assert!(set_cookie.starts_with("sid=***; Path=/"), "{set_cookie}");
    assert_eq!(results[1].request.as_ref().expect("request").headers.get("cookie").map(String::as_str), Some("***"));

    // The whole run without a jar, and one request that neither keeps nor sends.
    let mut off = log_in_then_me(&base);
    off["cookies"] = json!(false);
    let (outcome, results) = run(off).await;
    assert_eq!(outcome.status, FinalStatus::Failed);
    assert_eq!((results[0].status, results[1].status), (NodeStatus::Passed, NodeStatus::Failed));
    assert!(results[1].request.as_ref().expect("request").headers.get("cookie").is_none());
    let mut node_off = log_in_then_me(&base);
    node_off["nodes"][0]["request"]["cookies"] = json!(false);
    let (outcome, _) = run(node_off).await;
    assert_eq!(outcome.status, FinalStatus::Failed, "the log-in kept nothing");
}

/// Bytes no text encoding would keep as they are.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

#[tokio::test]
async fn a_five_mib_multipart_upload_arrives_part_for_part() {
    let (base, seen) = target().await;
    let (first, second) = (noise(3 * 1024 * 1024, 7), noise(2 * 1024 * 1024, 11));
    let encode = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let definition = json!({"nodes": [{"id": "upload", "kind": "request",
        "request": {"method": "POST", "url": format!("{base}/upload"), "multipart": [
            {"name": "note", "value": "two files for {{who}}"},
            {"name": "photo", "base64": encode(&first), "filename": "photo.png", "content_type": "image/png"},
            {"name": "data", "base64": encode(&second), "filename": "data.bin"}
        ]},
        "extractors": [{"name": "code", "kind": "statusCode"}, {"name": "parts", "kind": "jsonPath", "expression": "$.parts"}],
        "assertions": [status_is(200), {"source": "parts", "operator": "equals", "expected": 3}]}],
        "variables": {"who": "ada"}});
    let (outcome, results) = run(definition).await;
    assert_eq!(outcome.status, FinalStatus::Succeeded, "{outcome:?} {:?}", results[0].error);
    let parts = seen.lock().expect("seen").parts.clone();
    assert_eq!(parts.len(), 3);
    assert_eq!((parts[0].name.as_str(), parts[0].filename.as_deref()), ("note", None));
    assert_eq!(parts[0].bytes, b"two files for ada");
    assert_eq!(
        (parts[1].name.as_str(), parts[1].filename.as_deref(), parts[1].content_type.as_deref()),
        ("photo", Some("photo.png"), Some("image/png"))
    );
    assert!(parts[1].bytes == first, "the first file's bytes are intact");
    assert_eq!((parts[2].filename.as_deref(), parts[2].content_type.as_deref()), (Some("data.bin"), None));
    assert!(parts[2].bytes == second, "the second file's bytes are intact");
    let shown = results[0].request.as_ref().and_then(|r| r.body.clone()).expect("shown body");
    assert!(shown.contains("[3145728 bytes]") && shown.contains("two files for ada"), "{shown}");
    let content_type = &results[0].request.as_ref().expect("request").headers["content-type"];
    assert!(content_type.starts_with("multipart/form-data; boundary=hookflow-"), "{content_type}");
}

#[tokio::test]
async fn duration_is_the_exchanges_milliseconds() {
    let (base, _) = target().await;
    let timed = |id: &str, ms: u64, below: u64| {
        json!({"id": id, "kind": "request", "continue_on_failure": true,
            "request": {"method": "GET", "url": format!("{base}/slow?ms={ms}")},
            "extractors": [{"name": format!("{id}_ms"), "kind": "duration"}],
            "assertions": [{"source": format!("{id}_ms"), "operator": "lessThan", "expected": below}]})
    };
    let definition = json!({"nodes": [timed("fast", 0, 5000), timed("slow", 400, 300)]});
    let (outcome, results) = run(definition).await;
    assert_eq!(outcome.status, FinalStatus::Failed);
    assert_eq!(results[0].status, NodeStatus::Passed, "{:?}", results[0]);
    assert_eq!(results[1].status, NodeStatus::Failed);
    let slow = results[1].extracted["slow_ms"].as_f64().expect("a number");
    assert!((400.0..5000.0).contains(&slow), "{slow}");
}

/// The Petstore description's `Pet` as an inline schema: the whole description, its `Pet` named by `$ref`.
fn petstore_pet() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/openapi/petstore-3.0.yaml"))
        .expect("petstore");
    let mut description: Value = yaml_serde::from_str(&text).expect("yaml");
    description["$ref"] = json!("#/components/schemas/Pet");
    description
}

#[tokio::test]
async fn match_schema_passes_valid_pets_and_names_where_invalid_ones_break() {
    let app = TestApp::spawn().await;
    let schema = petstore_pet();
    let valid: Vec<Value> = (0..20)
        .map(|i| match i % 4 {
            0 => json!({"id": i, "name": format!("pet {i}")}),
            1 => json!({"id": i, "name": "", "tag": "dog"}),
            2 => json!({"id": i * 1000, "name": "x", "tag": "cat", "extra": [1, 2]}),
            _ => json!({"id": -i, "name": "ü", "owner": {"name": "ada"}}),
        })
        .collect();
    let invalid: Vec<(Value, &str, &str)> = (0..20)
        .map(|i| match i % 5 {
            0 => (json!({"name": "no id"}), "(root)", "required"),
            1 => (json!({"id": i}), "(root)", "required"),
            2 => (json!({"id": "seven", "name": "x"}), "/id", "type"),
            3 => (json!({"id": i, "name": "x", "tag": i}), "/tag", "type"),
            _ => (json!([{"id": i, "name": "x"}]), "(root)", "type"),
        })
        .collect();
    let mut values = serde_json::Map::new();
    let mut assertions = Vec::new();
    for (i, pet) in valid.iter().chain(invalid.iter().map(|(pet, _, _)| pet)).enumerate() {
        values.insert(format!("pet{i}"), pet.clone());
        assertions.push(json!({"source": format!("pet{i}"), "operator": "matchesSchema", "expected": schema}));
    }
    let reply = app
        .admin(Method::POST, "/assertions/evaluate", Some(json!({"assertions": assertions, "values": values})))
        .await;
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text);
    let results = reply.body["results"].as_array().expect("results");
    for (i, result) in results.iter().enumerate().take(20) {
        assert_eq!(result["passed"], json!(true), "valid pet {i}: {result}");
    }
    for (i, (pet, path, keyword)) in invalid.iter().enumerate() {
        let result = &results[20 + i];
        assert_eq!(result["passed"], json!(false), "invalid pet {pet}");
        let reason = result["reason"].as_str().unwrap_or_default();
        assert!(
            reason.starts_with(&format!("{path}: ")) && reason.ends_with(&format!("({keyword})")),
            "{pet}: {reason}"
        );
    }

    // A reference into a collection's imported description, inlined by the server when the node runs.
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/openapi/petstore-3.0.yaml"))
        .expect("petstore");
    let imported = app
        .admin(
            Method::POST,
            "/collections/import/openapi",
            Some(json!({"name": "petstore", "source": {"document": text}})),
        )
        .await;
    assert_eq!(imported.status.as_u16(), 201, "{}", imported.text);
    let collection = imported.body["collection"]["id"].as_str().expect("id").to_owned();
    let flow = app.create_flow("schemas", json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]})).await;
    let (base, _) = target().await;
    let try_pet = |kind: &str, reference: String| {
        json!({"node": {"id": "pet", "kind": "request",
            "request": {"method": "GET", "url": format!("{base}/pet/{kind}")},
            "extractors": [{"name": "pet", "kind": "jsonPath", "expression": "$"}],
            "assertions": [{"source": "pet", "operator": "matchesSchema", "expected": {"$ref": reference}}]}})
    };
    let pet_ref = format!("collection:{collection}#/components/schemas/Pet");
    let good = app.admin(Method::POST, &format!("/flows/{flow}/try"), Some(try_pet("good", pet_ref.clone()))).await;
    assert_eq!(good.body["status"], "passed", "{}", good.text);
    let bad = app.admin(Method::POST, &format!("/flows/{flow}/try"), Some(try_pet("bad", pet_ref))).await;
    assert_eq!(bad.body["status"], "failed", "{}", bad.text);
    let reason = bad.body["assertions"][0]["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("/id: ") && reason.ends_with("(type)"), "{reason}");
    let elsewhere = format!("collection:{}#/components/schemas/Pet", uuid::Uuid::now_v7());
    let unknown = app.admin(Method::POST, &format!("/flows/{flow}/try"), Some(try_pet("good", elsewhere))).await;
    assert_eq!(unknown.status.as_u16(), 400, "another organization's or no collection: {}", unknown.text);
    let nowhere = format!("collection:{collection}#/components/schemas/Nope");
    let nowhere = app.admin(Method::POST, &format!("/flows/{flow}/try"), Some(try_pet("good", nowhere))).await;
    assert_eq!(nowhere.status.as_u16(), 400, "{}", nowhere.text);

    let operators = app.admin(Method::GET, "/assertions/operators", None).await;
    assert!(operators.text.contains("matchesSchema"), "the catalog lists it");
    let extractors = app.admin(Method::GET, "/extractors", None).await;
    assert!(extractors.body["items"].as_array().expect("items").iter().any(|k| k["kind"] == "duration"));
}

#[tokio::test]
async fn bad_request_shapes_are_400_naming_the_field() {
    let app = TestApp::spawn().await;
    let node = |request: Value| {
        let mut full = json!({"method": "POST", "url": "https://api.example.com/x"});
        full.as_object_mut().expect("object").extend(request.as_object().expect("object").clone());
        json!({"name": "bad", "definition": {"nodes": [{"id": "n", "kind": "request", "request": full}]}})
    };
    for (request, named) in [
        (json!({"body": "x", "form": [["a", "b"]]}), "request.form"),
        (json!({"form": [["a", "b"]], "graphql": {"query": "{ a }"}}), "request.graphql"),
        (json!({"multipart": [{"name": "f", "value": "a", "base64": "YQ=="}]}), "request.multipart[0]"),
        (json!({"multipart": [{"name": "f", "base64": "not base64!"}]}), "request.multipart[0].base64"),
        (json!({"multipart": [{"name": "f", "secret": "PLAIN_NAME"}]}), "request.multipart[0].secret"),
        (json!({"multipart": []}), "request.multipart"),
        (json!({"graphql": {"query": ""}}), "request.graphql.query"),
        (json!({"graphql": {"query": "{ a }", "variables": [1]}}), "request.graphql.variables"),
        (json!({"client_certificate": "CLIENT"}), "request.client_certificate"),
        (json!({"form": [["a"]]}), "form"),
        (json!({"cookies": "yes"}), "cookies"),
    ] {
        let body = node(request.clone());
        let reply = app.admin(Method::POST, "/flows", Some(body)).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "{request}: {}", reply.text);
        let message = reply.body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{named}: {message}");
    }
    for expected in [json!("a schema"), json!({"$ref": "collection:not-an-id#/x"})] {
        let mut body = node(json!({}));
        body["definition"]["nodes"][0]["assertions"] =
            json!([{"source": "x", "operator": "matchesSchema", "expected": expected}]);
        let reply = app.admin(Method::POST, "/flows", Some(body)).await;
        assert_eq!(reply.status.as_u16(), 400, "{expected}: {}", reply.text);
        assert!(reply.text.contains("assertions[0].expected"), "{}", reply.text);
    }
    let fine = node(json!({"multipart": [{"name": "f", "secret": "{{secret.FILE}}", "filename": "f.txt"}],
        "cookies": false, "client_certificate": "{{secret.CLIENT}}"}));
    let reply = app.admin(Method::POST, "/flows", Some(fine)).await;
    assert_eq!(reply.status.as_u16(), 201, "{}", reply.text);
}

fn openssl(directory: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("openssl").args(args).current_dir(directory).output().expect("openssl runs");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate it issued, in `directory`.
fn certificates(directory: &std::path::Path) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=hookflow requests CA"]);
    openssl(directory, &ca);
    for (name, extensions) in [
        ("server", "subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n"),
        ("client", "basicConstraints=critical,CA:FALSE\nextendedKeyUsage=clientAuth\n"),
    ] {
        let mut request = vec!["req"];
        request.extend(ec);
        let (key, csr, ext, pem) =
            (format!("{name}.key"), format!("{name}.csr"), format!("{name}.ext"), format!("{name}.pem"));
        let subject = format!("/CN={name}");
        request.extend(["-keyout", &key, "-out", &csr, "-subj", &subject]);
        openssl(directory, &request);
        std::fs::write(directory.join(&ext), extensions).expect("extensions");
        openssl(
            directory,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                "2",
                "-extfile",
                &ext,
            ],
        );
    }
}

/// An HTTPS proxy: answers CONNECT, records what was asked, and pipes the bytes both ways.
async fn connect_proxy() -> (String, Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
                    if client.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let line = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_owned();
                record.lock().expect("seen").push(line.clone());
                let Some(authority) = line.strip_prefix("CONNECT ").and_then(|l| l.split(' ').next()) else { return };
                let Ok(mut upstream) = tokio::net::TcpStream::connect(authority).await else { return };
                if client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.is_ok() {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                }
            });
        }
    });
    (url, seen)
}

/// `openssl s_server` on 127.0.0.1 requiring a client certificate of the CA; answers `GET /` with a status page.
async fn mutual_tls_server(directory: &std::path::Path) -> (u16, tokio::process::Child) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("address").port();
    let child = tokio::process::Command::new("openssl")
        .args(["s_server", "-accept", &format!("127.0.0.1:{port}"), "-cert", "server.pem", "-key", "server.key"])
        .args(["-CAfile", "ca.pem", "-Verify", "1", "-www", "-quiet"])
        .current_dir(directory)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("openssl s_server");
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (port, child)
}

async fn put_secret(app: &TestApp, name: &str, value: &str, hosts: &[&str]) {
    let secret = PutSecret {
        value: value.parse().expect("a value"),
        allowed_hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
        runners_only: false,
    };
    app.api().secrets().put(name, &secret).await.expect("put the secret");
}

async fn node_results(app: &TestApp, flow: &str, execution: &str) -> Value {
    serde_json::to_value(app.api().executions().nodes(flow, execution).await.expect("nodes")).expect("json")
}

#[tokio::test]
async fn an_installed_runner_presents_a_client_certificate_through_its_https_proxy() {
    let directory = std::env::temp_dir().join(format!("hookflow-mtls-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&directory).expect("directory");
    certificates(&directory);
    let (port, _server) = mutual_tls_server(&directory).await;
    let (proxy, connects) = connect_proxy().await;
    let app = TestApp::spawn_for_execution().await;
    let read = |name: &str| std::fs::read_to_string(directory.join(name)).expect("pem");
    let identity = format!("{}{}", read("client.pem"), read("client.key"));
    put_secret(&app, "CLIENT", &identity, &["127.0.0.1"]).await;
    put_secret(&app, "ELSEWHERE", &identity, &["api.example.com"]).await;
    let node = |id: &str, certificate: Option<&str>| {
        let mut request = json!({"method": "GET", "url": format!("https://127.0.0.1:{port}/")});
        if let Some(certificate) = certificate {
            request["client_certificate"] = json!(certificate);
        }
        json!({"id": id, "kind": "request", "continue_on_failure": true, "request": request,
            "extractors": [{"name": format!("{id}_code"), "kind": "statusCode"}],
            "assertions": [{"source": format!("{id}_code"), "operator": "equals", "expected": 200}]})
    };
    let definition = json!({"nodes": [
        node("with", Some("{{secret.CLIENT}}")), node("without", None), node("elsewhere", Some("{{secret.ELSEWHERE}}"))
    ]});
    let flow = app.create_flow("mutual tls", definition).await;
    let creds = app.runner_creds(app.admin.org).await;
    let ca = directory.join("ca.pem");
    let env = [("HTTPS_PROXY", proxy.as_str()), ("SSL_CERT_FILE", ca.to_str().expect("path"))];
    let runner = RunnerProcess::spawn_with_env(RUNNER, &app.base, &creds, &[], &[], &env).await;
    let id = app.launch(&flow, json!({})).await["id"].as_str().expect("id").to_owned();
    let done = app.wait_finished(&flow, &id).await;
    let nodes = node_results(&app, &flow, &id).await;
    let items = nodes["items"].as_array().expect("items");
    let by = |node: &str| items.iter().find(|n| n["node_id"] == node).cloned().unwrap_or_default();
    assert_eq!(by("with")["status"], "passed", "{}\n{}", by("with"), runner.output());
    assert_eq!(by("without")["status"], "error", "no certificate, no answer: {}", by("without"));
    let refused = by("elsewhere");
    assert_eq!(refused["status"], "error");
    assert!(
        refused["error"].as_str().unwrap_or_default().contains("not among its allowed hosts"),
        "the secret's allowed_hosts hold: {refused}"
    );
    assert_eq!(done["status"], "failed");
    let connects = connects.lock().expect("seen").clone();
    let through = format!("CONNECT 127.0.0.1:{port} HTTP/1.1");
    assert!(connects.iter().filter(|c| **c == through).count() >= 2, "through the proxy: {connects:?}");
    let shown = nodes.to_string() + &runner.output();
    assert!(!shown.contains("PRIVATE KEY") && !shown.contains(read("client.key").lines().nth(1).unwrap_or("-")));
    let _ = std::fs::remove_dir_all(&directory);
}

/// Drains a child's output so it never blocks on a full pipe.
fn drain(lines: tokio::io::Lines<tokio::io::BufReader<impl tokio::io::AsyncRead + Unpin + Send + 'static>>) {
    let mut lines = lines;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
}

#[tokio::test]
async fn the_servers_embedded_runner_never_uses_the_environments_proxy() {
    use tokio::io::AsyncBufReadExt as _;
    let (base, _) = target().await;
    let (proxy, requests) = connect_proxy().await;
    let data = std::env::temp_dir().join(format!("hookflow-proxy-{}", uuid::Uuid::now_v7()));
    let url = hookflow_tests::cluster::fresh_database_url().await;
    let mut command = hookflow_tests::server::command(crate::SERVER, &url, &data);
    command
        .args(["--embedded-runner", "on"])
        .env("HOOKFLOW_METRICS_LISTEN", "off")
        .env("HTTPS_PROXY", &proxy)
        .env("HTTP_PROXY", &proxy)
        .env("ALL_PROXY", &proxy)
        .env("https_proxy", &proxy)
        .env("http_proxy", &proxy)
        .kill_on_drop(true);
    let mut child = command.spawn().expect("spawn hookflow-server");
    let mut out = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut err = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let (org, key) = hookflow_tests::server::first_start_credentials(&mut out).await;
    let listening = hookflow_tests::server::line_with(&mut err, "hookflow-server listening").await;
    let server = format!("http://{}", hookflow_tests::server::field(&listening, "address="));
    drain(out);
    drain(err);
    let client = reqwest::Client::builder().no_proxy().build().expect("client");
    let call = |method: Method, path: String, body: Option<Value>| {
        let mut request = client.request(method, format!("{server}{path}")).header("x-api-key", &key);
        request = request.header("x-organization-id", &org);
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move { request.send().await.expect("send").json::<Value>().await.expect("json") }
    };
    let definition = json!({"nodes": [{"id": "direct", "kind": "request",
        "request": {"method": "GET", "url": format!("{base}/slow")},
        "extractors": [{"name": "code", "kind": "statusCode"}], "assertions": [status_is(200)]}]});
    let flow = call(Method::POST, "/flows".into(), Some(json!({"name": "direct", "definition": definition}))).await;
    let flow = flow["id"].as_str().expect("flow id").to_owned();
    let execution = call(Method::POST, format!("/flows/{flow}/launch"), Some(json!({}))).await;
    let execution = execution["id"].as_str().expect("execution id").to_owned();
    let mut status = Value::Null;
    for _ in 0..120 {
        status = call(Method::GET, format!("/flows/{flow}/executions/{execution}"), None).await["status"].clone();
        if !matches!(status.as_str(), Some("queued" | "running")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(status, "succeeded", "the embedded runner reached the target");
    assert!(requests.lock().expect("seen").is_empty(), "the proxy saw nothing: {:?}", requests.lock());
    let _ = child.kill().await;
    let _ = std::fs::remove_dir_all(&data);
}
