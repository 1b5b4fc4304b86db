//! Arbitrary bytes as SASL tokens: the PLAIN parser and both SCRAM mechanisms' client
//! messages must refuse what is malformed, never panic or allocate without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nagare_kafka::fuzzing::sasl_exchange(data);
});
