//! A held batch's frames copied into place: by the gatherers, which send
//! them to its device piece by piece, or by a thread of the batch's own in
//! its turn (one batch's copy at a time, in batch order).

use std::sync::mpsc::{sync_channel, Receiver, TryRecvError};
use std::sync::{Arc, Condvar, Mutex};

use crate::engine::HostFrames;
use crate::{Error, Result};

/// The frames of a held batch: ready, or their kept parts
/// ([`HostFrames::keep_parts`]) being copied into place by a thread of
/// their own, started when the batch was held, so that the copy overlaps
/// the filling of the next batches and the wait for the devices. The
/// thread hands the frames back before it lets go of the parts copied
/// (see [`HostFrames::gather_apart`]).
pub(super) enum Gathering {
    Ready(HostFrames),
    Copying(Receiver<HostFrames>),
    /// Kept parts handed to the gatherers, which send them to the batch's
    /// device piece by piece ([`HostFrames::send_kept`]); their maxima come
    /// back on the channel.
    Sending(HostFrames, Receiver<crate::engine::upload::Gathered>),
}

/// The turns of the batches' copies: one batch's at a time, in batch
/// order, each with every thread of the pool (started at once, the copies
/// of a job's first batches shared the host's memory bandwidth, and the
/// oldest, which a device waited for, finished with the newest).
#[derive(Default)]
pub(super) struct GatherTurns {
    next: u64,
    turn: Arc<Turn>,
}

/// The ticket whose turn it is, and the signal that it changed.
type Turn = (Mutex<u64>, Condvar);

impl GatherTurns {
    /// A ticket for the next batch, and the turns it waits on.
    fn ticket(&mut self) -> (u64, Arc<Turn>) {
        self.next += 1;
        (self.next - 1, self.turn.clone())
    }
}

/// Runs `f` in the turn of `ticket`, then gives the turn to the next (also
/// when `f` panics).
fn in_turn<T>(ticket: u64, turn: &Turn, f: impl FnOnce() -> T) -> T {
    struct Pass<'a>(u64, &'a Turn);
    impl Drop for Pass<'_> {
        fn drop(&mut self) {
            let (lock, cv) = self.1;
            *lock.lock().unwrap_or_else(|e| e.into_inner()) = self.0 + 1;
            cv.notify_all();
        }
    }
    let (lock, cv) = turn;
    let mut now = lock.lock().unwrap_or_else(|e| e.into_inner());
    while *now < ticket {
        now = cv.wait(now).unwrap_or_else(|e| e.into_inner());
    }
    drop(now);
    let _pass = Pass(ticket, turn);
    f()
}

impl Gathering {
    /// `frames` (`rows` of them) copied into place in their turn.
    pub(super) fn start(
        mut frames: HostFrames,
        rows: usize,
        turns: &mut GatherTurns,
    ) -> Result<Self> {
        if !frames.has_kept_parts() {
            return Ok(Gathering::Ready(frames));
        }
        if let Some(rx) = frames.send_kept() {
            return Ok(Gathering::Sending(frames, rx));
        }
        let (ticket, turn) = turns.ticket();
        let turn2 = turn.clone();
        let (tx, rx) = sync_channel(1);
        std::thread::Builder::new()
            .name("amtool-gather".into())
            .spawn(move || {
                let copied = in_turn(ticket, &turn, || {
                    crate::engine::batch_trace::mark_with(|| format!("gather{rows}"));
                    let copied = frames.gather_apart(false);
                    crate::engine::batch_trace::mark_with(|| format!("gathered{rows}"));
                    copied
                });
                // A closed channel: the batch was dropped (an error).
                let _ = tx.send(frames);
                drop(copied);
            })
            .map(|_| Gathering::Copying(rx))
            .map_err(|e| {
                // The batches after it must not wait for its turn.
                in_turn(ticket, &turn2, || ());
                Error::Engine(format!("cannot start a thread to copy frames: {e}"))
            })
    }

    /// Whether the frames are in place (finish will not wait).
    pub(super) fn is_done(&mut self) -> bool {
        if let Gathering::Sending(_, rx) = self {
            return match rx.try_recv() {
                Ok(found) => {
                    let placeholder = Gathering::Ready(HostFrames::default());
                    if let Gathering::Sending(mut f, _) = std::mem::replace(self, placeholder) {
                        f.note_sent(found);
                        *self = Gathering::Ready(f);
                    }
                    true
                }
                Err(TryRecvError::Empty) => false,
                // A copy panicked: `finish` says so.
                Err(TryRecvError::Disconnected) => true,
            };
        }
        let Gathering::Copying(rx) = self else {
            return true;
        };
        match rx.try_recv() {
            Ok(frames) => {
                *self = Gathering::Ready(frames);
                true
            }
            Err(TryRecvError::Empty) => false,
            // Its thread panicked: `finish` says so.
            Err(TryRecvError::Disconnected) => true,
        }
    }

    pub(super) fn finish(self) -> Result<HostFrames> {
        match self {
            Gathering::Ready(f) => Ok(f),
            Gathering::Sending(mut f, rx) => {
                let found = rx.recv().map_err(|_| {
                    Error::Engine("a thread copying a batch's frames panicked".into())
                })?;
                f.note_sent(found);
                Ok(f)
            }
            Gathering::Copying(rx) => rx
                .recv()
                .map_err(|_| Error::Engine("the thread copying a batch's frames panicked".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Copies take their turns in ticket order, whatever order their
    /// threads start in, and a panicking one passes its turn on.
    #[test]
    fn copies_take_their_turns_in_batch_order() {
        let mut turns = GatherTurns::default();
        let tickets: Vec<_> = (0..4).map(|_| turns.ticket()).collect();
        let order = Arc::new(Mutex::new(Vec::new()));
        let handles: Vec<_> = tickets
            .into_iter()
            .rev()
            .map(|(ticket, turn)| {
                let order = order.clone();
                std::thread::spawn(move || {
                    in_turn(ticket, &turn, || {
                        order.lock().unwrap().push(ticket);
                        if ticket == 1 {
                            panic!("a copy that fails");
                        }
                    })
                })
            })
            .collect();
        let failed = handles.into_iter().filter_map(|h| h.join().err()).count();
        assert_eq!(failed, 1);
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
    }
}
