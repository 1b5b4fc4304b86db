//! Arbitrary bytes as a stream of Kafka request frames: framing, header parsing, the
//! allocation guard and the body decoders must return errors, never panic or allocate
//! without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nagare_kafka::fuzzing::decode_all(data);
});
