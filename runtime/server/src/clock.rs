//! The wall clock that the server's lease controllers read: the identity
//! lease's renewals and collection, and the leader election of the
//! singleton controllers.
//!
//! A server reads the system time ([`Clock::system`]). A test server gets
//! a [`Clock::controllable`] one that a test can freeze at the current
//! time and step forward (as client-go's `testing/clock.FakeClock` lets a
//! controller test do), so lease expiry is tested without waiting for it:
//! every step wakes the controllers that read the clock
//! ([`Clock::steps`]), which look at their leases again at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A shared clock (cheap to clone; clones read the same time).
#[derive(Clone, Default)]
pub struct Clock(Option<Arc<Controlled>>);

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            None => f.write_str("Clock::system"),
            Some(c) => f
                .debug_struct("Clock::controllable")
                .field("state", &*c.lock())
                .finish(),
        }
    }
}

/// A controllable clock's state and its step notifications.
struct Controlled {
    state: Mutex<State>,
    steps: tokio::sync::watch::Sender<u64>,
}

#[derive(Debug, Clone, Copy, Default)]
struct State {
    /// Added to the system time (and the monotonic clock) while running.
    offset: jiff::SignedDuration,
    /// While frozen: the time it stands at, and the monotonic instant of
    /// the system at that time (for [`Clock::instant`]).
    frozen: Option<(jiff::Timestamp, std::time::Instant)>,
}

impl Controlled {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Clock {
    /// The system time.
    pub fn system() -> Clock {
        Clock(None)
    }

    /// A clock that follows the system time until [`freeze`](Self::freeze)
    /// and moves with [`step`](Self::step).
    pub fn controllable() -> Clock {
        let (steps, _) = tokio::sync::watch::channel(0);
        Clock(Some(Arc::new(Controlled {
            state: Mutex::new(State::default()),
            steps,
        })))
    }

    /// The current time (for timestamps written to objects).
    pub fn now(&self) -> jiff::Timestamp {
        let Some(c) = &self.0 else {
            return jiff::Timestamp::now();
        };
        let state = *c.lock();
        match state.frozen {
            Some((at, _)) => at,
            None => {
                let now = jiff::Timestamp::now();
                now.checked_add(state.offset).unwrap_or(now)
            }
        }
    }

    /// The current monotonic instant (for measuring how long something
    /// lasted: unlike [`now`](Self::now), the system's does not jump when
    /// the wall clock is set). Steps move it as they move `now`.
    pub fn instant(&self) -> std::time::Instant {
        let Some(c) = &self.0 else {
            return std::time::Instant::now();
        };
        let state = *c.lock();
        let (base, offset) = match state.frozen {
            Some((_, at)) => (at, state.offset),
            None => (std::time::Instant::now(), state.offset),
        };
        let magnitude = offset.unsigned_abs();
        if offset.is_negative() {
            base.checked_sub(magnitude).unwrap_or(base)
        } else {
            base.checked_add(magnitude).unwrap_or(base)
        }
    }

    /// Stops the clock at the current time (a controllable clock; the
    /// system clock cannot be stopped and ignores it).
    pub fn freeze(&self) {
        let Some(c) = &self.0 else { return };
        let mut state = c.lock();
        if state.frozen.is_none() {
            let now = jiff::Timestamp::now();
            let at = now.checked_add(state.offset).unwrap_or(now);
            state.frozen = Some((at, std::time::Instant::now()));
        }
    }

    /// Lets a frozen clock run again from where it stands.
    pub fn unfreeze(&self) {
        let Some(c) = &self.0 else { return };
        let mut state = c.lock();
        if let Some((at, _)) = state.frozen.take() {
            state.offset = at.duration_since(jiff::Timestamp::now());
        }
    }

    /// Moves the clock forward by `by` (frozen or not) and wakes the
    /// controllers that read it.
    pub fn step(&self, by: Duration) {
        let Some(c) = &self.0 else { return };
        let by = jiff::SignedDuration::try_from(by).unwrap_or(jiff::SignedDuration::MAX);
        {
            let mut state = c.lock();
            if let Some((at, _)) = &mut state.frozen {
                *at = at.checked_add(by).unwrap_or(*at);
            }
            state.offset = state.offset.saturating_add(by);
        }
        c.steps.send_modify(|n| *n += 1);
    }

    /// The steps of this clock from now on (none for the system clock).
    pub fn steps(&self) -> Steps {
        Steps(self.0.as_ref().map(|c| c.steps.subscribe()))
    }
}

/// The steps of a [`Clock`], for a controller to wake on.
#[derive(Debug)]
pub struct Steps(Option<tokio::sync::watch::Receiver<u64>>);

impl Steps {
    /// Resolves once the clock was stepped since the last call (or since
    /// [`Clock::steps`]); never for the system clock.
    pub async fn next(&mut self) {
        let stepped = match &mut self.0 {
            Some(rx) => rx.changed().await.is_ok(),
            None => false,
        };
        if !stepped {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frozen_clock_moves_only_by_steps() {
        let clock = Clock::controllable();
        clock.freeze();
        let at = clock.now();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(clock.now(), at);
        clock.step(Duration::from_secs(90));
        assert_eq!(
            clock.now(),
            at.checked_add(jiff::SignedDuration::from_secs(90))
                .unwrap_or(at)
        );
        clock.unfreeze();
        let later = clock.now();
        assert!(
            later
                >= at
                    .checked_add(jiff::SignedDuration::from_secs(90))
                    .unwrap_or(at)
        );
        assert!(later > jiff::Timestamp::now());
    }

    #[test]
    fn system_clock_ignores_controls() {
        let clock = Clock::system();
        clock.freeze();
        clock.step(Duration::from_secs(3600));
        let diff = clock.now().duration_since(jiff::Timestamp::now());
        assert!(diff.abs() < jiff::SignedDuration::from_secs(5));
    }

    #[tokio::test]
    async fn steps_wake_waiters() {
        let clock = Clock::controllable();
        let mut steps = clock.steps();
        let woken = tokio::spawn(async move { steps.next().await });
        clock.step(Duration::from_secs(1));
        tokio::time::timeout(Duration::from_secs(5), woken)
            .await
            .expect("woken by the step")
            .expect("task");
    }
}
