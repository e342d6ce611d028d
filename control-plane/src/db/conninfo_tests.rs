//! The connection strings of libpq's documentation (34.1.1, 34.1.2) and the multi-host forms.

use super::*;

fn hosts(target: &Target) -> Vec<String> {
    target.hosts.iter().map(|(endpoint, _)| endpoint.to_string()).collect()
}

#[test]
fn the_documented_single_host_urls_go_to_sqlx_unchanged() {
    for url in [
        "postgresql://localhost",
        "postgresql://localhost:5433",
        "postgresql://localhost/mydb",
        "postgresql://user@localhost",
        "postgresql://user:secret@localhost",
        "postgresql://other@localhost/otherdb?connect_timeout=10&application_name=myapp",
        "postgresql:///mydb?host=localhost&port=5433",
        "postgresql://[2001:db8::1234]/database",
        "postgresql:///dbname?host=/var/lib/postgresql",
        "postgresql://%2Fvar%2Flib%2Fpostgresql/dbname",
    ] {
        let target = parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(target.is_plain(), "{url}");
        let expected = PgConnectOptions::from_str(url).expect("sqlx reads it");
        assert_eq!(format!("{:?}", target.hosts[0].1), format!("{expected:?}"), "{url}");
    }
    let options = &parse("postgresql:///mydb?host=localhost&port=5433").expect("url").hosts[0].1;
    assert_eq!((options.get_host(), options.get_port(), options.get_database()), ("localhost", 5433, Some("mydb")));
    let socket = &parse("postgresql:///dbname?host=/var/lib/postgresql").expect("url").hosts[0];
    assert_eq!(socket.0.to_string(), "/var/lib/postgresql:5432");
    assert_eq!(
        parse("postgresql://[2001:db8::1234]/database").expect("v6").hosts[0].0.to_string(),
        "[2001:db8::1234]:5432"
    );
}

#[test]
fn several_hosts_in_the_authority_each_get_their_port() {
    let target = parse("postgresql://host1:123,host2:456/somedb?target_session_attrs=any&application_name=myapp")
        .expect("multi-host");
    assert_eq!(hosts(&target), ["host1:123", "host2:456"]);
    assert_eq!(target.attrs, Some(SessionAttrs::Any));
    for (endpoint, options) in &target.hosts {
        assert_eq!((options.get_host(), options.get_port()), (endpoint.host.as_str(), endpoint.port));
        assert_eq!(options.get_database(), Some("somedb"));
        assert_eq!(options.get_application_name(), Some("myapp"));
    }
    let target = parse("postgres://hookflow:secret@h1:5432,h2,[::1]:5434/hookflow?target_session_attrs=read-write")
        .expect("multi-host");
    assert_eq!(hosts(&target), ["h1:5432", "h2:5432", "[::1]:5434"]);
    assert_eq!(target.attrs, Some(SessionAttrs::ReadWrite));
    let options = &target.hosts[1].1;
    assert_eq!((options.get_username(), options.get_database()), ("hookflow", Some("hookflow")));
}

#[test]
fn host_and_port_lists_in_the_query() {
    let target = parse("postgresql:///db?host=a,b&port=5432,5433").expect("lists");
    assert_eq!(hosts(&target), ["a:5432", "b:5433"]);
    let target = parse("postgresql:///db?host=a,b,c&port=6000").expect("one port for all");
    assert_eq!(hosts(&target), ["a:6000", "b:6000", "c:6000"]);
    let target = parse("postgresql:///db?host=a,b&port=,5433").expect("an empty port is the default");
    assert_eq!(hosts(&target), ["a:5432", "b:5433"]);
    let sockets = parse("postgresql:///db?host=/run/a,/run/b").expect("sockets");
    assert_eq!(sockets.hosts[1].1.get_socket().map(|s| s.display().to_string()).as_deref(), Some("/run/b"));
    assert!(parse("postgresql:///db?host=a,b,c&port=1,2").is_err(), "ports must be one or one per host");
    assert!(parse("postgresql://a:x,b/db").is_err(), "a port is a number");
}

#[test]
fn one_host_with_session_attributes_is_asked() {
    let target = parse("postgres://h1/db?target_session_attrs=read-write").expect("url");
    assert!(!target.is_plain());
    assert_eq!(hosts(&target), ["h1:5432"]);
    assert!(parse("postgres://h1/db?target_session_attrs=writable").is_err());
}

#[test]
fn keyword_value_strings() {
    let target = parse("host=localhost port=5432 dbname=mydb connect_timeout=10").expect("keywords");
    assert!(target.is_plain());
    let options = &target.hosts[0].1;
    assert_eq!((options.get_host(), options.get_port(), options.get_database()), ("localhost", 5432, Some("mydb")));
    let target = parse(
        "host=host1,host2 port = 5432,5433 dbname=hookflow user=app password='a \\'quoted\\' pass' \
         target_session_attrs=prefer-standby application_name=hf",
    )
    .expect("keywords");
    assert_eq!(hosts(&target), ["host1:5432", "host2:5433"]);
    assert_eq!(target.attrs, Some(SessionAttrs::PreferStandby));
    let options = &target.hosts[0].1;
    assert_eq!((options.get_username(), options.get_application_name()), ("app", Some("hf")));
    let debug = format!("{options:?}");
    assert!(debug.contains("a 'quoted' pass"), "{debug}");
    assert!(parse("host=a sslcompression=1").is_err(), "unknown settings are refused");
    assert!(parse("host='a").is_err(), "an unclosed quote");
    assert!(parse("nonsense").is_err());
}

#[test]
fn session_attributes_accept_hosts_as_libpq_does() {
    let primary = HostRole { in_recovery: false, read_only: false };
    let standby = HostRole { in_recovery: true, read_only: true };
    assert!(SessionAttrs::ReadWrite.accepts(primary) && !SessionAttrs::ReadWrite.accepts(standby));
    assert!(SessionAttrs::Primary.accepts(primary) && !SessionAttrs::Primary.accepts(standby));
    assert!(SessionAttrs::Standby.accepts(standby) && !SessionAttrs::Standby.accepts(primary));
    assert!(SessionAttrs::ReadOnly.accepts(standby) && !SessionAttrs::ReadOnly.accepts(primary));
    assert!(SessionAttrs::Any.accepts(standby) && SessionAttrs::PreferStandby.accepts(primary));
}

/// Hardening IV (16): a malformed string's error names no part of its password, wherever the parser cut it.
#[test]
fn errors_never_carry_the_password() {
    let password = "Sup3r-s3cret/pa:ss";
    let encoded = "Sup3r-s3cret%2Fpa%3Ass";
    for text in [
        format!("postgres://hookflow:{password}@db:54x2/hookflow"),
        format!("postgres://hookflow:{encoded}@db:notaport/hookflow"),
        format!("postgres://hookflow:{encoded}@db:5432,db2:x/hookflow"),
        format!("postgres://hookflow:{encoded}@db1:5432,db2:5432/hookflow?port=1,2,3"),
        format!("postgres://hookflow:{encoded}@[::1/hookflow"),
        format!("postgres://hookflow:{encoded}@db/hookflow?target_session_attrs=whatever"),
        format!("host=db port=5432 password='{password}"),
        format!("host=db password={password} bogus=1"),
        format!("host=db,db2 port=1,2,3 password={password}"),
        format!("postgres://db/hookflow?password={encoded}&port=x"),
    ] {
        let error = parse(&text).err().unwrap_or_else(|| panic!("{text} is refused"));
        for piece in ["Sup3r", "s3cret", "cret/", "pa:ss", "%2Fpa", "%3Ass"] {
            assert!(!error.contains(piece), "{text}: {error}");
        }
        assert!(!error.is_empty());
    }
    // Without a password the error still quotes what is wrong.
    let error = parse("postgres://db:notaport/hookflow").err().expect("refused");
    assert!(error.contains("notaport"), "{error}");
}
