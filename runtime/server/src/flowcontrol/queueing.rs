//! The dispatcher of one Limited priority level: a number of seats (its
//! concurrency limit), and queues that requests wait in when every seat is
//! taken. A flow is shuffle-sharded onto a hand of queues and joins the
//! shortest one; when a seat frees, the waiting request with the smallest
//! virtual start time is dispatched (start-time fair queuing, every request
//! costing one unit: a simplification of kube-apiserver's fair queuing
//! that still shares the seats fairly between flows).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

use super::shuffle_sharding;

/// The queuing parameters of a level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueParams {
    /// Seats (concurrency limit), at least 1.
    pub seats: usize,
    /// Number of queues; 0 rejects at once when every seat is taken
    /// (`limitResponse.type: Reject`).
    pub queues: usize,
    /// Queues dealt to a flow.
    pub hand_size: usize,
    /// Waiting requests a queue holds at most.
    pub queue_length_limit: usize,
}

struct Waiter {
    id: u64,
    start: f64,
    tx: oneshot::Sender<()>,
}

#[derive(Default)]
struct Queue {
    waiters: VecDeque<Waiter>,
    /// The virtual finish time of the last request this queue took.
    last_finish: f64,
}

struct State {
    params: QueueParams,
    executing: usize,
    queues: Vec<Queue>,
    waiting: usize,
    virtual_time: f64,
    next_id: u64,
}

/// A Limited level's seats and queues.
pub struct Level {
    state: Mutex<State>,
}

impl std::fmt::Debug for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("Level")
            .field("params", &s.params)
            .field("executing", &s.executing)
            .field("waiting", &s.waiting)
            .finish()
    }
}

/// What a request gets on arrival.
pub enum Admission {
    /// A seat, at once.
    Seat(Seat),
    /// A place in a queue: await [`Ticket::wait`].
    Queued(Ticket),
    /// No seat and no room: reject.
    Rejected,
}

/// A seat taken; released (and the next waiter dispatched) on drop.
pub struct Seat {
    level: Arc<Level>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut s = self.level.lock();
        s.executing = s.executing.saturating_sub(1);
        dispatch(&mut s);
    }
}

/// A place in a queue. Dropping it leaves the queue (or gives back a seat
/// granted meanwhile).
pub struct Ticket {
    level: Arc<Level>,
    id: u64,
    rx: Option<oneshot::Receiver<()>>,
}

impl Ticket {
    /// Waits for a seat until `deadline`; `None` when the deadline passed
    /// first (the request has left its queue then).
    pub async fn wait(mut self, deadline: tokio::time::Instant) -> Option<Seat> {
        let rx = self.rx.as_mut()?;
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(())) => {
                self.rx = None;
                Some(Seat {
                    level: self.level.clone(),
                })
            }
            // Dropping `self` leaves the queue, or releases a seat granted
            // in between.
            _ => None,
        }
    }
}

impl Ticket {
    /// The seat, if one was granted already (does not wait).
    #[cfg(test)]
    fn try_seat(&mut self) -> Option<Seat> {
        let rx = self.rx.as_mut()?;
        rx.try_recv().ok()?;
        self.rx = None;
        Some(Seat {
            level: self.level.clone(),
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else {
            return;
        };
        let mut s = self.level.lock();
        let mut removed = false;
        for q in &mut s.queues {
            if let Some(pos) = q.waiters.iter().position(|w| w.id == self.id) {
                q.waiters.remove(pos);
                removed = true;
                break;
            }
        }
        if removed {
            s.waiting = s.waiting.saturating_sub(1);
        } else if rx.try_recv().is_ok() {
            // Dispatched but never used: give the seat back.
            s.executing = s.executing.saturating_sub(1);
            dispatch(&mut s);
        }
    }
}

fn new_queues(n: usize) -> Vec<Queue> {
    (0..n).map(|_| Queue::default()).collect()
}

/// Dispatches waiters while seats are free: the head with the smallest
/// virtual start time goes first.
fn dispatch(s: &mut State) {
    while s.executing < s.params.seats && s.waiting > 0 {
        let Some(best) = s
            .queues
            .iter()
            .enumerate()
            .filter_map(|(i, q)| q.waiters.front().map(|w| (i, w.start)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
        else {
            s.waiting = 0;
            return;
        };
        let Some(w) = s.queues[best].waiters.pop_front() else {
            return;
        };
        s.waiting -= 1;
        s.virtual_time = s.virtual_time.max(w.start);
        if w.tx.send(()).is_ok() {
            s.executing += 1;
        }
    }
}

impl Level {
    /// A level with the given parameters.
    pub fn new(params: QueueParams) -> Arc<Level> {
        Arc::new(Level {
            state: Mutex::new(State {
                params,
                executing: 0,
                queues: new_queues(params.queues),
                waiting: 0,
                virtual_time: 0.0,
                next_id: 0,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Applies new parameters (a configuration change); waiting requests
    /// move to the new queues.
    pub fn set_params(&self, params: QueueParams) {
        let mut s = self.lock();
        if s.params == params {
            return;
        }
        if params.queues != s.queues.len() {
            let old = std::mem::replace(&mut s.queues, new_queues(params.queues));
            let mut moved = 0;
            for (i, q) in old.into_iter().enumerate() {
                for w in q.waiters {
                    if params.queues == 0 {
                        // Dropping the sender rejects the waiter.
                        continue;
                    }
                    let target = i % params.queues;
                    let finish = w.start + 1.0;
                    let nq = &mut s.queues[target];
                    nq.last_finish = nq.last_finish.max(finish);
                    nq.waiters.push_back(w);
                    moved += 1;
                }
            }
            s.waiting = moved;
        }
        s.params = params;
        dispatch(&mut s);
    }

    /// The current parameters.
    pub fn params(&self) -> QueueParams {
        self.lock().params
    }

    /// Requests executing and waiting.
    pub fn counts(&self) -> (usize, usize) {
        let s = self.lock();
        (s.executing, s.waiting)
    }

    /// A request of the flow with hash `flow` arrives.
    pub fn admit(self: &Arc<Self>, flow: u64) -> Admission {
        let mut s = self.lock();
        if s.executing < s.params.seats && s.waiting == 0 {
            s.executing += 1;
            return Admission::Seat(Seat {
                level: self.clone(),
            });
        }
        if s.queues.is_empty() {
            return Admission::Rejected;
        }
        let hand = shuffle_sharding::deal(flow, s.queues.len(), s.params.hand_size.max(1));
        let Some(chosen) = hand.into_iter().min_by_key(|i| s.queues[*i].waiters.len()) else {
            return Admission::Rejected;
        };
        if s.queues[chosen].waiters.len() >= s.params.queue_length_limit {
            return Admission::Rejected;
        }
        let id = s.next_id;
        s.next_id += 1;
        let (tx, rx) = oneshot::channel();
        let virtual_time = s.virtual_time;
        let q = &mut s.queues[chosen];
        let start = q.last_finish.max(virtual_time);
        q.last_finish = start + 1.0;
        q.waiters.push_back(Waiter { id, start, tx });
        s.waiting += 1;
        dispatch(&mut s);
        Admission::Queued(Ticket {
            level: self.clone(),
            id,
            rx: Some(rx),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn params(seats: usize, queues: usize, hand: usize, limit: usize) -> QueueParams {
        QueueParams {
            seats,
            queues,
            hand_size: hand,
            queue_length_limit: limit,
        }
    }

    fn seat(a: Admission) -> Seat {
        match a {
            Admission::Seat(s) => s,
            _ => panic!("expected a seat"),
        }
    }

    fn ticket(a: Admission) -> Ticket {
        match a {
            Admission::Queued(t) => t,
            _ => panic!("expected a queue"),
        }
    }

    fn soon() -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_millis(50)
    }

    #[tokio::test]
    async fn seats_then_queue_then_reject() {
        let level = Level::new(params(1, 1, 1, 1));
        let first = seat(level.admit(1));
        let second = ticket(level.admit(2));
        assert!(matches!(level.admit(3), Admission::Rejected));
        assert_eq!(level.counts(), (1, 1));
        drop(first);
        let second = second.wait(soon()).await.expect("dispatched");
        assert_eq!(level.counts(), (1, 0));
        drop(second);
        assert_eq!(level.counts(), (0, 0));
    }

    #[tokio::test]
    async fn reject_type_never_queues_and_timeouts_leave_the_queue() {
        let level = Level::new(params(1, 0, 0, 0));
        let _busy = seat(level.admit(1));
        assert!(matches!(level.admit(2), Admission::Rejected));

        let level = Level::new(params(1, 4, 2, 5));
        let busy = seat(level.admit(1));
        let waiting = ticket(level.admit(2));
        assert!(waiting.wait(soon()).await.is_none());
        assert_eq!(level.counts(), (1, 0));
        drop(busy);
        assert_eq!(level.counts(), (0, 0));
    }

    #[tokio::test]
    async fn fair_between_flows() {
        // One seat; a heavy flow queues 6 requests before a light flow
        // queues 2: the light flow is served after at most one more heavy
        // request, not after all of them.
        let level = Level::new(params(1, 64, 1, 100));
        let (heavy, light) = (
            shuffle_sharding::flow_hash("s", "heavy"),
            shuffle_sharding::flow_hash("s", "light"),
        );
        assert_ne!(
            shuffle_sharding::deal(heavy, 64, 1),
            shuffle_sharding::deal(light, 64, 1)
        );
        let mut running = Some(seat(level.admit(heavy)));
        let mut tickets: Vec<(&str, Ticket)> = Vec::new();
        for _ in 0..6 {
            tickets.push(("heavy", ticket(level.admit(heavy))));
        }
        for _ in 0..2 {
            tickets.push(("light", ticket(level.admit(light))));
        }
        let mut order = Vec::new();
        while !tickets.is_empty() {
            drop(running.take());
            let i = tickets
                .iter_mut()
                .position(|(_, t)| {
                    running = t.try_seat();
                    running.is_some()
                })
                .expect("a waiter was dispatched");
            order.push(tickets.remove(i).0);
        }
        let light: Vec<usize> = order
            .iter()
            .enumerate()
            .filter(|(_, w)| **w == "light")
            .map(|(i, _)| i)
            .collect();
        assert_eq!(light.len(), 2);
        assert!(light.iter().all(|p| *p < 4), "{order:?}");
    }

    #[tokio::test]
    async fn shrinking_and_growing_seats() {
        let level = Level::new(params(1, 2, 1, 10));
        let _a = seat(level.admit(1));
        let b = ticket(level.admit(2));
        level.set_params(params(2, 3, 1, 10));
        assert!(b.wait(soon()).await.is_some());
    }
}
