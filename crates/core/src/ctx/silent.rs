//! Requests whose response the caller's thread reported (see [`crate::direct::Mail::delivered`]):
//! the stage of [`super::Ctx::publish`] that drops their events, up to their last one.

use std::collections::HashSet;

use crate::event::Event;

#[derive(Default)]
pub(crate) struct Silenced(HashSet<u64>);

impl Silenced {
    /// Nothing more of request `id` is reported, up to its last event.
    pub fn add(&mut self, id: u64) {
        self.0.insert(id);
    }

    pub fn contains(&self, id: u64) -> bool {
        self.0.contains(&id)
    }

    /// Drops the events of silenced requests; a request's last event (`Complete` or `Error`)
    /// ends its silence.
    pub fn apply(&mut self, events: &mut Vec<Event>) {
        let silent = &mut self.0;
        if !silent.is_empty() {
            events.retain(|e| match e.request_id() {
                Some(id) if silent.contains(&id) => {
                    if matches!(e, Event::Complete { .. } | Event::Error { .. }) {
                        silent.remove(&id);
                    }
                    false
                }
                _ => true,
            });
        }
    }
}
