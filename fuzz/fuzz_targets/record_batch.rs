//! Arbitrary bytes through the record batch parser, validator and decoder (all codecs):
//! they must return errors, never panic or allocate without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nagare_log::batch;

fuzz_target!(|data: &[u8]| {
    let _ = batch::parse_header(data);
    let _ = batch::validate(data, 1 << 20);
    // decode_records does not check the CRC, so mutated bodies reach the decoders.
    let _ = batch::decode_records(data);
    if let Ok(ranges) = batch::split_batches(data) {
        for r in ranges {
            if let Ok(h) = batch::validate(&data[r.clone()], 1 << 20) {
                let _ = h.compression();
            }
            let _ = batch::decode_records(&data[r]);
        }
    }
});
