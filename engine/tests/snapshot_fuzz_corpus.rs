//! Replays every file of fuzz/corpus/snapshot_load through the fuzz entry point, so the seed
//! inputs (valid snapshots and broken ones) and any crash the fuzzer once found run every time.

#[test]
fn snapshot_load_corpus_replays_without_panicking() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus/snapshot_load");
    let mut count = 0;
    for entry in std::fs::read_dir(dir).expect("fuzz/corpus/snapshot_load exists") {
        let path = entry.expect("readable corpus entry").path();
        if path.is_file() {
            let data = std::fs::read(&path).expect("readable corpus file");
            eprintln!("replaying {}", path.display());
            ringlog_engine::snapshot::fuzz_snapshot_load(&data);
            count += 1;
        }
    }
    assert!(count > 0, "the corpus {dir} is empty");
}
