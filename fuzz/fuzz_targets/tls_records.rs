//! Arbitrary bytes as a client's TLS records at a listener's TLS server: refused with an
//! alert, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nagare_listener::fuzzing::tls_records(data);
});
