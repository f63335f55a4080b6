//! Owned, block-aligned buffers for O_DIRECT I/O (placeholder until the io backends land).
#[derive(Debug)]
pub struct AlignedBuf {
    _private: (),
}
