//! What the engine's integration tests share: a caller that holds what the engine reports
//! until it takes it (see `saetta_core::backlog`).

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use saetta_core::{Engine, Event, EventSink};

/// Holds what the engine reports until the test takes it, as the caller's thread does.
#[derive(Default)]
pub struct HoldingSink(Mutex<Vec<Event>>);

impl EventSink for HoldingSink {
    fn push(&self, events: &mut Vec<Event>) {
        self.0.lock().unwrap().append(events);
    }
}

impl HoldingSink {
    /// Response bytes waiting, once the engine has stopped reading (nothing new for 300 ms).
    pub fn settled_backlog(&self) -> usize {
        let held = || saetta_core::event::payload_len(&self.0.lock().unwrap());
        let mut last = usize::MAX;
        while held() != last {
            last = held();
            thread::sleep(Duration::from_millis(300));
        }
        last
    }

    /// Takes what waits, as the caller's thread does, until requests `1..=n` complete; returns
    /// their body lengths by id (index 0 unused). Fails on an error or a stall.
    pub fn take_until_complete(&self, engine: &Engine, n: usize) -> Vec<usize> {
        let mut bodies = vec![0usize; n + 1];
        let mut done = 0;
        let deadline = Instant::now() + Duration::from_secs(60);
        while done < n {
            assert!(Instant::now() < deadline, "stalled: {bodies:?}");
            let events = std::mem::take(&mut *self.0.lock().unwrap());
            engine
                .backlog()
                .taken(saetta_core::event::payload_len(&events));
            for ev in events {
                match ev {
                    Event::Data { id, chunk } => bodies[id as usize] += chunk.len(),
                    Event::Complete { .. } => done += 1,
                    Event::Error { error, .. } => panic!("{error:?}"),
                    _ => {}
                }
            }
            thread::sleep(Duration::from_millis(1));
        }
        bodies
    }
}

/// A shared sink for [`Engine::start`].
pub fn holding() -> Arc<HoldingSink> {
    Arc::default()
}
