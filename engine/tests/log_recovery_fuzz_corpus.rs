//! Replays every file of fuzz/corpus/log_recovery through the fuzz entry point, so the inputs
//! the fuzzer found interesting (and any crash it once found) run in every test run.

#[test]
fn every_corpus_input_recovers_or_fails_cleanly() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus/log_recovery");
    let mut count = 0;
    for entry in std::fs::read_dir(dir).expect("the corpus folder exists") {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        eprintln!("replaying {}", path.display());
        ringlog_engine::log::fuzz_log_recovery(&data);
        count += 1;
    }
    assert!(count > 0, "the corpus {dir} is empty");
}
