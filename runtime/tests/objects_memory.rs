//! Streams stay streams: a 64 MiB object goes into the local store and
//! back out while no allocation larger than a few MiB happens and the heap
//! never grows by more than a few MiB.
//!
//! Its own test binary, because it installs a counting global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use bytes::Bytes;
use futures_util::StreamExt;
use runtime::objects::{ByteStream, LocalStore, ObjectStore};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize, size: usize) {
    let now = CURRENT.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(now, Relaxed);
    LARGEST.fetch_max(size, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size(), layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size(), layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            CURRENT.fetch_sub(layout.size(), Relaxed);
            grew(new_size, new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const MIB: usize = 1024 * 1024;
const TOTAL: usize = 64 * MIB;
static CHUNK: [u8; 64 * 1024] = [0x5a; 64 * 1024];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_local_64mib_put_and_get_stay_streams() {
    let dir = std::env::temp_dir().join(format!("gateway-objects-memory-{}", std::process::id()));
    let store = LocalStore::new(dir.clone(), "http://gw".into(), b"key".to_vec()).unwrap();

    let baseline = CURRENT.load(Relaxed);
    PEAK.store(baseline, Relaxed);
    LARGEST.store(0, Relaxed);

    let body: ByteStream = Box::pin(futures_util::stream::iter(
        (0..TOTAL / CHUNK.len()).map(|_| Ok(Bytes::from_static(&CHUNK))),
    ));
    let stored = store
        .put("big/object.bin", "application/octet-stream", body, None)
        .await
        .unwrap();
    assert_eq!(stored as usize, TOTAL);

    let mut read = 0usize;
    let mut stream = store.get("big/object.bin", None).await.unwrap().stream;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        assert!(chunk.iter().all(|&b| b == 0x5a));
        read += chunk.len();
    }
    assert_eq!(read, TOTAL);

    let largest = LARGEST.load(Relaxed);
    let growth = PEAK.load(Relaxed).saturating_sub(baseline);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        largest <= 2 * MIB,
        "an allocation of {largest} bytes: a body was buffered"
    );
    assert!(
        growth <= 8 * MIB,
        "the heap grew by {growth} bytes while moving {TOTAL}"
    );
    eprintln!("largest allocation {largest} B, heap growth {growth} B");
}
