//! The watch over a peer that goes silent (issue 51): a server stopped (SIGSTOP) or a route
//! that drops packets sends no ICMP unreachable, and QUIC itself only gives up at its idle
//! timeout (30 s). A connection with requests in flight takes its peer as gone, as browsers
//! take a path whose PTO probes go unanswered, once a datagram that asked for an answer has
//! none for a few probe timeouts ([`limit`]; see [`super::udp::Udp::unanswered`]). Nothing is
//! watched while the connection is idle: a peer with nothing to say is not silent.

use std::time::Duration;

use tokio::time::Instant;

/// The peer's max_ack_delay as quinn and aioquic advertise it (RFC 9000's default): quinn does
/// not tell the one the peer sent.
const MAX_ACK_DELAY: Duration = Duration::from_millis(25);
/// The least time a peer is given: a loopback's PTO is about MAX_ACK_DELAY, and a loaded
/// machine may leave a live peer (or our own receiving) unscheduled for a while.
const FLOOR: Duration = Duration::from_millis(300);
/// The most time a peer is given where that still covers two unanswered probes (see [`limit`]).
const CAP: Duration = Duration::from_secs(1);
/// The least time the look again takes (see [`Watchdog::expired`]).
const LEAST_SECOND_LOOK: Duration = Duration::from_millis(100);

/// A probe timeout on a path whose smoothed RTT is `srtt` (RFC 9002 §6.2.1: the smoothed RTT,
/// 4 times its variation, and max_ack_delay). quinn does not tell the variation: RFC 9002's
/// first one is taken, srtt/2, which overestimates it on a steady path (a slower verdict,
/// never a hastier one).
fn pto(srtt: Duration) -> Duration {
    srtt * 3 + MAX_ACK_DELAY
}

/// How long a datagram may go unanswered before the peer is taken as gone, and how long the
/// second look then takes: the time of three probes backed off (1 + 2 + 4 PTOs: the third
/// one unanswered, as QUIC backs off), but at most [`CAP`] (so a request on a dead path fails
/// within about a second on the paths most requests take), never under two probes unanswered
/// (3 PTOs: a slow path is not taken for a dead one) nor under [`FLOOR`]. At a 10 ms RTT
/// that is 385 ms; from 40 ms, 1 s; at 250 ms, 2.3 s.
fn limit(srtt: Duration) -> (Duration, Duration) {
    let pto = pto(srtt);
    let limit = (pto * 7).min(CAP).max(pto * 3).max(FLOOR);
    (limit, pto.max(LEAST_SECOND_LOOK))
}

/// One connection's watch: when to look at its peer's silence next.
#[derive(Default)]
pub(crate) struct Watchdog {
    look: Option<Look>,
}

struct Look {
    /// The unanswered datagram looked at.
    since: Instant,
    /// When to look.
    at: Instant,
    /// How long the second look takes.
    second: Duration,
    /// The first look found it still unanswered.
    again: bool,
}

impl Watchdog {
    /// When to look next, given since when a datagram has gone unanswered (`None`: none has,
    /// or nothing is in flight) and the path's smoothed RTT.
    pub(crate) fn due(
        &mut self,
        unanswered: Option<Instant>,
        srtt: impl FnOnce() -> Duration,
    ) -> Option<Instant> {
        let Some(since) = unanswered else {
            self.look = None;
            return None;
        };
        match &self.look {
            Some(look) if look.since == since => {}
            _ => {
                let (limit, second) = limit(srtt());
                self.look = Some(Look {
                    since,
                    at: since + limit,
                    second,
                    again: false,
                });
            }
        }
        self.look.as_ref().map(|l| l.at)
    }

    /// Looks at `now` (the datagram of [`Watchdog::due`] still unanswered): whether the peer is
    /// gone. Not at the first look: it may only show that this side was not running (a
    /// machine loaded, or suspended), and a peer on the same machine with it. The second
    /// look, one PTO later, decides, if it comes on time (this side ran meanwhile, and
    /// received what came); a late one looks again.
    pub(crate) fn expired(&mut self, now: Instant) -> bool {
        let Some(look) = self.look.as_mut().filter(|l| now >= l.at) else {
            return false;
        };
        if look.again && now < look.at + look.second {
            return true;
        }
        look.again = true;
        look.at = now + look.second;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_limit_is_three_probes_within_a_second_but_never_under_two() {
        // Loopback: the floor.
        assert_eq!(limit(MS / 5), (FLOOR, LEAST_SECOND_LOOK));
        // 10 ms: three probes (7 PTOs of 55 ms).
        assert_eq!(limit(10 * MS), (385 * MS, LEAST_SECOND_LOOK));
        // 40 ms: the cap.
        assert_eq!(limit(40 * MS), (CAP, 145 * MS));
        // 250 ms: two probes (3 PTOs of 775 ms), over the cap.
        assert_eq!(limit(250 * MS), (2325 * MS, 775 * MS));
    }

    #[test]
    fn a_silence_is_looked_at_twice_before_the_peer_is_gone() {
        let mut dog = Watchdog::default();
        let t0 = Instant::now();
        assert_eq!(dog.due(None, || MS), None);
        assert_eq!(dog.due(Some(t0), || MS), Some(t0 + FLOOR));
        assert!(!dog.expired(t0 + FLOOR - MS));
        // The first look: a second one, 100 ms on.
        let first = t0 + FLOOR;
        assert!(!dog.expired(first));
        let second = first + LEAST_SECOND_LOOK;
        assert_eq!(dog.due(Some(t0), || unreachable!()), Some(second));
        assert!(dog.expired(second + MS));
    }

    #[test]
    fn a_late_second_look_looks_again() {
        let mut dog = Watchdog::default();
        let t0 = Instant::now();
        dog.due(Some(t0), || MS);
        assert!(!dog.expired(t0 + FLOOR));
        // This side did not run for a while: what came meanwhile is not read yet.
        let late = t0 + FLOOR + LEAST_SECOND_LOOK * 3;
        assert!(!dog.expired(late));
        assert_eq!(dog.due(Some(t0), || MS), Some(late + LEAST_SECOND_LOOK));
        assert!(dog.expired(late + LEAST_SECOND_LOOK));
    }

    #[test]
    fn an_answer_ends_the_watch_and_a_new_silence_starts_over() {
        let mut dog = Watchdog::default();
        let t0 = Instant::now();
        dog.due(Some(t0), || MS);
        assert!(!dog.expired(t0 + FLOOR));
        assert_eq!(dog.due(None, || MS), None);
        assert!(!dog.expired(t0 + FLOOR * 2));
        let t1 = t0 + FLOOR * 2;
        assert_eq!(dog.due(Some(t1), || MS), Some(t1 + FLOOR));
        assert!(!dog.expired(t1 + FLOOR));
    }
}
