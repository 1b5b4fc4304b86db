use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

use super::*;
use crate::security::crypto;

fn store_with(user: &str, mechanism: ScramMechanism, password: &str, salt: &[u8]) -> UserStore {
    let store = UserStore::in_memory();
    let salted = crypto::pbkdf2(mechanism, password.as_bytes(), salt, 4096);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    rt.block_on(store.upsert_scram(user, mechanism, 4096, salt, &salted))
        .expect("upsert");
    store
}

#[test]
fn rfc7677_sha256_vector() {
    let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("salt");
    let store = store_with("user", ScramMechanism::Sha256, "pencil", &salt);
    let mut ex =
        ServerExchange::with_server_nonce(ScramMechanism::Sha256, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
    let first = ex
        .client_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", &store)
        .expect("server-first");
    assert_eq!(
        String::from_utf8(first).expect("utf8"),
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    );
    assert_eq!(ex.user(), Some("user"));
    let (last, user) = ex
        .client_final(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
        .expect("server-final");
    assert_eq!(
        String::from_utf8(last).expect("utf8"),
        "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    );
    assert_eq!(user, "user");
}

/// A client side written from RFC 5802, independent of the server code paths.
struct Client {
    mechanism: ScramMechanism,
    bare: String,
}

impl Client {
    fn first(mechanism: ScramMechanism, user: &str) -> (Client, Vec<u8>) {
        let name = user.replace('=', "=3D").replace(',', "=2C");
        let bare = format!("n={name},r=fyko+d2lbbFgONRv9qkxdawL");
        let msg = format!("n,,{bare}").into_bytes();
        (Client { mechanism, bare }, msg)
    }

    /// The client-final message and the server signature to expect.
    fn last(&self, server_first: &[u8], password: &str) -> (Vec<u8>, String) {
        let sf = std::str::from_utf8(server_first).expect("utf8");
        let mut nonce = "";
        let mut salt = Vec::new();
        let mut iterations = 0;
        for a in sf.split(',') {
            if let Some(v) = a.strip_prefix("r=") {
                nonce = v;
            } else if let Some(v) = a.strip_prefix("s=") {
                salt = B64.decode(v).expect("salt");
            } else if let Some(v) = a.strip_prefix("i=") {
                iterations = v.parse().expect("iterations");
            }
        }
        let m = self.mechanism;
        let salted = crypto::pbkdf2(m, password.as_bytes(), &salt, iterations);
        let client_key = crypto::hmac(m, &salted, b"Client Key");
        let stored_key = crypto::hash(m, &client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("{},{},{}", self.bare, sf, without_proof);
        let sig = crypto::hmac(m, &stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        let server_key = crypto::hmac(m, &salted, b"Server Key");
        let server_sig = crypto::hmac(m, &server_key, auth.as_bytes());
        (
            format!("{without_proof},p={}", B64.encode(proof)).into_bytes(),
            format!("v={}", B64.encode(server_sig)),
        )
    }
}

fn added(user: &str, password: &str) -> UserStore {
    let store = UserStore::in_memory();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    rt.block_on(store.add(user, password, false)).expect("add");
    store
}

#[test]
fn sha512_round_trip_and_wrong_password() {
    let store = added("al,i=ce", "secret");
    for (password, ok) in [("secret", true), ("wrong", false)] {
        let mut ex = ServerExchange::new(ScramMechanism::Sha512);
        let (client, first) = Client::first(ScramMechanism::Sha512, "al,i=ce");
        let sf = ex.client_first(&first, &store).expect("server-first");
        let (last, expected) = client.last(&sf, password);
        match ex.client_final(&last) {
            Ok((v, user)) => {
                assert!(ok);
                assert_eq!(String::from_utf8(v).expect("utf8"), expected);
                assert_eq!(user, "al,i=ce");
            }
            Err(ScramError::Failed { user }) => {
                assert!(!ok);
                assert_eq!(user, "al,i=ce");
            }
            Err(e) => panic!("unexpected {e}"),
        }
    }
}

#[test]
fn sha256_round_trip_from_add() {
    let store = added("bob", "pw");
    let mut ex = ServerExchange::new(ScramMechanism::Sha256);
    let (client, first) = Client::first(ScramMechanism::Sha256, "bob");
    let sf = ex.client_first(&first, &store).expect("server-first");
    let (last, expected) = client.last(&sf, "pw");
    let (v, _) = ex.client_final(&last).expect("ok");
    assert_eq!(String::from_utf8(v).expect("utf8"), expected);
}

#[test]
fn unknown_user_fails_only_at_the_end_with_a_stable_salt() {
    let store = added("bob", "pw");
    let salt_of = |sf: &[u8]| {
        std::str::from_utf8(sf)
            .expect("utf8")
            .split(',')
            .find(|a| a.starts_with("s="))
            .map(str::to_string)
    };
    let mut salts = Vec::new();
    for _ in 0..2 {
        let mut ex = ServerExchange::new(ScramMechanism::Sha512);
        let (client, first) = Client::first(ScramMechanism::Sha512, "mallory");
        let sf = ex
            .client_first(&first, &store)
            .expect("a server-first message");
        assert!(std::str::from_utf8(&sf).expect("utf8").contains(",i=4096"));
        salts.push(salt_of(&sf));
        let (last, _) = client.last(&sf, "pw");
        assert!(matches!(
            ex.client_final(&last),
            Err(ScramError::Failed { user }) if user == "mallory"
        ));
    }
    assert_eq!(salts[0], salts[1]);
}

#[test]
fn malformed_messages_are_refused() {
    let store = added("bob", "pw");
    let cases: &[&[u8]] = &[
        b"",
        b"p=tls-unique,,n=bob,r=abc",
        b"x,,n=bob,r=abc",
        b"n,,n=bob",
        b"n,,n=,r=abc",
        b"n,,n=b=2Xob,r=abc",
        b"n,,m=x,n=bob,r=abc",
        b"n,,n=bob,r=abc,tokenauth=true",
        b"n,a=eve,n=bob,r=abc",
        b"n,,n=bob,r=a b",
        b"\xff\xfe",
    ];
    for c in cases {
        let mut ex = ServerExchange::new(ScramMechanism::Sha256);
        assert!(
            matches!(ex.client_first(c, &store), Err(ScramError::Malformed(_))),
            "{:?}",
            String::from_utf8_lossy(c)
        );
        // The exchange is over after an error.
        assert!(ex.client_final(b"c=biws,r=abc,p=AAAA").is_err());
    }
    let long = vec![b'a'; MAX_CLIENT_MESSAGE + 1];
    assert!(ServerExchange::new(ScramMechanism::Sha256)
        .client_first(&long, &store)
        .is_err());
    // Extensions other than tokenauth are ignored; an equal authzid is fine.
    let mut ex = ServerExchange::new(ScramMechanism::Sha256);
    assert!(ex
        .client_first(b"n,a=bob,n=bob,r=abc,foo=bar,tokenauth=false", &store)
        .is_ok());
}

#[test]
fn client_final_checks_binding_and_nonce() {
    let store = added("bob", "pw");
    for bad in [
        "c=eSws,r={n},p=AAAA",
        "c=biws,r=other,p=AAAA",
        "r={n},c=biws,p=AAAA",
        "c=biws,r={n}",
        "c=biws,r={n},p=***",
    ] {
        let mut ex = ServerExchange::new(ScramMechanism::Sha256);
        let sf = ex
            .client_first(b"n,,n=bob,r=abc", &store)
            .expect("server-first");
        let sf = String::from_utf8(sf).expect("utf8");
        let nonce = sf
            .split(',')
            .next()
            .and_then(|r| r.strip_prefix("r="))
            .expect("nonce");
        let msg = bad.replace("{n}", nonce);
        assert!(ex.client_final(msg.as_bytes()).is_err(), "{msg}");
    }
    // A proof of the wrong length is a failed login, not a crash.
    let mut ex = ServerExchange::new(ScramMechanism::Sha256);
    let sf = ex.client_first(b"n,,n=bob,r=abc", &store).expect("sf");
    let sf = String::from_utf8(sf).expect("utf8");
    let nonce = &sf[2..sf.find(',').expect("comma")];
    assert!(matches!(
        ex.client_final(format!("c=biws,r={nonce},p=AAAA").as_bytes()),
        Err(ScramError::Failed { .. })
    ));
}

#[test]
fn saslname_decoding() {
    assert_eq!(decode_saslname("a=2Cb=3Dc").ok().as_deref(), Some("a,b=c"));
    assert!(decode_saslname("a=").is_err());
    assert!(decode_saslname("a=2").is_err());
    assert!(decode_saslname("a=41").is_err());
}
