//! Replays the batch_decode fuzz corpus through the fuzz entry point, so that every input that
//! once crashed it (and the seed inputs) keeps running in the normal test run.

use std::path::Path;

#[test]
fn batch_decode_corpus_replays_without_panicking() {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fuzz/corpus/batch_decode"
    ));
    let mut replayed = 0;
    for entry in std::fs::read_dir(dir).expect("fuzz/corpus/batch_decode exists") {
        let path = entry.expect("readable corpus entry").path();
        if path.is_file() {
            let data = std::fs::read(&path).expect("readable corpus file");
            ringlog_engine::batch::fuzz_batch_decode(&data);
            replayed += 1;
        }
    }
    assert!(replayed > 0, "the batch_decode corpus is empty");
}
