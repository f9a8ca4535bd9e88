#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| saetta_core_fuzz::ws_frames(data));
