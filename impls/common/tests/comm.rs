//! The in-process communicator: results of every collective, and exact word and message counts
//! on hand-computed cases.

use parbench_common::comm::threads::{run_threads, RankRun};
use parbench_common::comm::{CommError, CommStats, Communicator, Phase};

fn run<R: Send>(
    p: usize,
    f: impl Fn(&dyn Communicator) -> Result<R, CommError> + Sync,
) -> Vec<RankRun<R>> {
    run_threads(p, f).unwrap()
}

/// [words sent, words received, messages sent, messages received] of one phase.
fn volume(s: &CommStats, phase: Phase) -> [u64; 4] {
    s.phase(phase).volume()
}

#[test]
fn ring_all_gather_concatenates_and_counts_what_the_ring_sends() {
    // Uneven blocks: rank k contributes k + 1 values (1, 2, 3, 4).
    let counts = vec![1, 2, 3, 4];
    let runs = run(4, |c| {
        let mine: Vec<f64> = (0..=c.rank()).map(|x| (10 * c.rank() + x) as f64).collect();
        c.all_gather_f64(Phase::Replication, &mine, &counts)
    });
    let expected = vec![0.0, 10.0, 11.0, 20.0, 21.0, 22.0, 30.0, 31.0, 32.0, 33.0];
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r.value, expected, "rank {i}");
        // Sends every block but that of rank i + 1, receives every block but its own.
        let sent = 10 - counts[(i + 1) % 4] as u64;
        let received = 10 - counts[i] as u64;
        assert_eq!(volume(&r.stats, Phase::Replication), [sent, received, 3, 3]);
        assert_eq!(r.stats.phase(Phase::Propagation).volume(), [0; 4]);
    }
}

#[test]
fn even_all_gather_sends_q_minus_one_over_q_of_the_data() {
    for q in [1, 2, 3, 5] {
        let runs = run(q, |c| {
            let counts = vec![6; c.size()];
            c.all_gather_u32(Phase::Replication, &[c.rank() as u32; 6], &counts)
        });
        for r in &runs {
            let w = 6 * (q as u64 - 1);
            assert_eq!(
                volume(&r.stats, Phase::Replication),
                [w, w, q as u64 - 1, q as u64 - 1]
            );
            assert_eq!(r.value.len(), 6 * q);
        }
    }
}

#[test]
fn ring_reduce_scatter_sums_and_counts() {
    let counts = vec![2, 0, 3];
    let runs = run(3, |c| {
        // Rank k contributes (k + 1) * (index + 1).
        let send: Vec<f64> = (0..5).map(|x| ((c.rank() + 1) * (x + 1)) as f64).collect();
        c.reduce_scatter_sum(Phase::Reduction, &send, &counts)
    });
    // Sum over ranks of (k + 1) is 6.
    assert_eq!(runs[0].value, vec![6.0, 12.0]);
    assert_eq!(runs[1].value, Vec::<f64>::new());
    assert_eq!(runs[2].value, vec![18.0, 24.0, 30.0]);
    for (i, r) in runs.iter().enumerate() {
        let sent = 5 - counts[i] as u64;
        let received = 5 - counts[(i + 2) % 3] as u64;
        assert_eq!(
            volume(&r.stats, Phase::Reduction),
            [sent, received, 2, 2],
            "rank {i}"
        );
    }
}

#[test]
fn all_reduce_is_reduce_scatter_then_all_gather() {
    let runs = run(4, |c| {
        let mut buf: Vec<f64> = (0..8).map(|x| (x * (c.rank() + 1)) as f64).collect();
        c.all_reduce_sum(Phase::Reduction, &mut buf)?;
        Ok(buf)
    });
    let expected: Vec<f64> = (0..8).map(|x| (x * 10) as f64).collect();
    for r in &runs {
        assert_eq!(r.value, expected);
        // 8 words in blocks of 2: 6 sent and 6 received in each half.
        assert_eq!(volume(&r.stats, Phase::Reduction), [12, 12, 6, 6]);
    }
}

#[test]
fn binomial_broadcast_reaches_everyone_once() {
    for (q, root) in [(1, 0), (5, 0), (6, 4), (8, 3)] {
        let runs = run(q, |c| {
            let mut buf = if c.rank() == root {
                vec![1.5, 2.5, 3.5]
            } else {
                vec![0.0; 3]
            };
            c.broadcast_f64(Phase::Replication, root, &mut buf)?;
            Ok(buf)
        });
        let mut total_sent = 0;
        for (i, r) in runs.iter().enumerate() {
            assert_eq!(r.value, vec![1.5, 2.5, 3.5], "q {q} rank {i}");
            let v = volume(&r.stats, Phase::Replication);
            let expect_recv = if i == root { [0, 0] } else { [3, 1] };
            assert_eq!([v[1], v[3]], expect_recv, "q {q} rank {i}");
            total_sent += v[2];
        }
        assert_eq!(total_sent, q as u64 - 1, "q {q}: a tree has q - 1 edges");
        // The root of a binomial tree sends ceil(log2 q) messages.
        let root_sent = runs[root].stats.phase(Phase::Replication).messages_sent;
        assert_eq!(root_sent, (q as f64).log2().ceil() as u64);
    }
}

#[test]
fn cyclic_shift_moves_blocks_and_self_shifts_are_free() {
    let runs = run(5, |c| {
        let got = c.shift_f64(Phase::Propagation, &vec![c.rank() as f64; c.rank() + 1], 2)?;
        let same = c.shift_f64(Phase::Propagation, &[7.0], 5)?;
        Ok((got, same))
    });
    for (i, r) in runs.iter().enumerate() {
        let from = (i + 2) % 5;
        assert_eq!(r.value.0, vec![from as f64; from + 1]);
        assert_eq!(r.value.1, vec![7.0]);
        // Sent i + 1 words to rank i - 2, received from + 1 words; the self shift is not counted.
        assert_eq!(
            volume(&r.stats, Phase::Propagation),
            [i as u64 + 1, from as u64 + 1, 1, 1]
        );
    }
}

#[test]
fn split_makes_fibers_and_layers_and_collectives_stay_inside_them() {
    // 6 ranks as a 3 x 2 grid: rank = i * 2 + j; fibers share i, layers share j.
    let runs = run(6, |c| {
        let (i, j) = (c.rank() / 2, c.rank() % 2);
        let fiber = c.split(i, j)?;
        let layer = c.split(j, i)?;
        assert_eq!((fiber.size(), fiber.rank()), (2, j));
        assert_eq!((layer.size(), layer.rank()), (3, i));
        let f = fiber.all_gather_f64(Phase::Replication, &[c.rank() as f64], &[1, 1])?;
        let mut l = vec![c.rank() as f64];
        layer.all_reduce_sum(Phase::Reduction, &mut l)?;
        // Key order: reversed keys reverse the ranks.
        let rev = c.split(0, 5 - c.rank())?;
        assert_eq!(rev.rank(), 5 - c.rank());
        c.barrier()?;
        Ok((f, l[0]))
    });
    for (r, run) in runs.iter().enumerate() {
        let (i, j) = (r / 2, r % 2);
        assert_eq!(run.value.0, vec![(2 * i) as f64, (2 * i + 1) as f64]);
        let layer_sum: usize = (0..3).map(|k| 2 * k + j).sum();
        assert_eq!(run.value.1, layer_sum as f64);
        // Fiber all-gather: 1 word each way; layer all-reduce of 1 word over 3 ranks: the blocks
        // are 0, 0, 1 words, and 4 messages each way.
        assert_eq!(volume(&run.stats, Phase::Replication), [1, 1, 1, 1]);
        let rv = volume(&run.stats, Phase::Reduction);
        assert_eq!([rv[2], rv[3]], [4, 4]);
    }
    let sent: u64 = runs.iter().map(|r| r.stats.total().words_sent).sum();
    let received: u64 = runs.iter().map(|r| r.stats.total().words_received).sum();
    assert_eq!(sent, received, "every word sent is received");
}

#[test]
fn a_failing_rank_stops_the_others_instead_of_hanging() {
    let result = run_threads(4, |c| -> Result<(), String> {
        if c.rank() == 2 {
            return Err("rank two gave up".into());
        }
        c.all_gather_f64(Phase::Replication, &[1.0], &[1, 1, 1, 1])
            .map_err(|e| e.to_string())?;
        Ok(())
    });
    let failure = result.unwrap_err();
    assert_eq!(failure.rank, 2);
    assert_eq!(failure.error, "rank two gave up");
}

#[test]
fn mismatched_collectives_are_reported_not_hung_on() {
    let result = run_threads(2, |c| -> Result<(), CommError> {
        if c.rank() == 0 {
            c.send_recv_f64(Phase::Propagation, &[1.0], 1, 1)?;
        }
        Ok(())
    });
    let failure = result.unwrap_err();
    assert_eq!(failure.rank, 0);
    assert!(matches!(
        failure.error,
        CommError::PeerExited { rank: 1, .. }
    ));
}

#[test]
fn wrong_block_counts_are_usage_errors() {
    let result = run_threads(2, |c| c.all_gather_f64(Phase::Replication, &[1.0], &[1]));
    assert!(matches!(
        result.unwrap_err().error,
        CommError::Usage {
            call: "all-gather",
            ..
        }
    ));
}

#[test]
#[should_panic(expected = "boom")]
fn a_panicking_rank_panics_the_caller() {
    let _ = run_threads(3, |c| -> Result<(), CommError> {
        if c.rank() == 1 {
            panic!("boom");
        }
        c.barrier()
    });
}

/// The formulas the MPI backend records (`comm::convention`) equal what the in-process backend
/// counts message by message, for every collective, rank, size and uneven block lengths.
#[test]
fn the_counting_formulas_equal_the_in_process_counts() {
    use parbench_common::comm::convention;
    use parbench_common::rng::Rng;
    let mut rng = Rng::new(77);
    for q in 1..=6usize {
        for _ in 0..4 {
            let counts: Vec<usize> = (0..q).map(|_| rng.below(7) as usize).collect();
            let n: usize = counts.iter().sum();
            let root = rng.below(q as u64) as usize;
            let offset = 1 + rng.below(q as u64) as usize;
            let runs = run(q, |comm| {
                let i = comm.rank();
                let mine = vec![1.0; counts[i]];
                comm.all_gather_f64(Phase::Replication, &mine, &counts)?;
                comm.reduce_scatter_sum(Phase::Reduction, &vec![1.0; n], &counts)?;
                let mut buf = vec![1.0; n + i % 2];
                comm.all_reduce_sum(Phase::Propagation, &mut buf[..n])?;
                comm.broadcast_f64(Phase::Replication, root, &mut buf[..n])?;
                comm.shift_f64(Phase::Propagation, &vec![0.5; i + 1], offset)?;
                Ok::<_, CommError>(())
            });
            for (i, r) in runs.iter().enumerate() {
                let mut want = CommStats::default();
                convention::all_gather(&mut want, Phase::Replication, i, &counts);
                convention::reduce_scatter(&mut want, Phase::Reduction, i, &counts);
                convention::all_reduce(&mut want, Phase::Propagation, i, q, n);
                convention::broadcast(&mut want, Phase::Replication, i, q, root, n);
                let (dest, source) = ((i + q - offset % q) % q, (i + offset) % q);
                convention::send_recv(
                    &mut want,
                    Phase::Propagation,
                    i,
                    (dest, i + 1),
                    (source, source + 1),
                );
                for phase in [Phase::Replication, Phase::Propagation, Phase::Reduction] {
                    assert_eq!(
                        volume(&r.stats, phase),
                        volume(&want, phase),
                        "q {q} rank {i} {phase:?} counts {counts:?} root {root} offset {offset}"
                    );
                }
            }
        }
    }
}

#[test]
fn point_to_point_messages_keep_their_order_and_do_not_mix_with_collectives() {
    // Ranks 1 and 2 each send three messages to rank 0; rank 1 sends its first before an
    // all-reduce, rank 2 all of them after it. Rank 0 receives from anyone, so the interleaving
    // of senders is free but each sender's order is not. Before rank 0 enters the all-reduce,
    // rank 2 cannot have finished it, so nothing from rank 2 can be there yet.
    let runs = run(3, |c| {
        if c.rank() == 0 {
            assert_eq!(c.try_receive_bytes(Some(2))?.map(|m| m.0), None::<usize>);
            let first = c.receive_bytes(None)?;
            assert_eq!(first.0, 1, "only rank 1 sends before the all-reduce");
            let mut got = vec![first];
            let mut sum = [1.0];
            c.all_reduce_sum(Phase::Reduction, &mut sum)?;
            for _ in 0..5 {
                got.push(c.receive_bytes(None)?);
            }
            let none_left = c.try_receive_bytes(None)?.is_none();
            c.send_bytes(1, b"bye")?;
            Ok((got, sum[0], none_left))
        } else {
            let me = c.rank() as u8;
            if me == 1 {
                c.send_bytes(0, &[me, 0])?;
            }
            let mut sum = [1.0];
            c.all_reduce_sum(Phase::Reduction, &mut sum)?;
            if me == 2 {
                c.send_bytes(0, &[me, 0])?;
            }
            c.send_bytes(0, &[me, 1])?;
            c.send_bytes(0, &[me, 2, 9, 9])?;
            let reply = if me == 1 {
                c.receive_bytes(Some(0))?.1
            } else {
                Vec::new()
            };
            Ok((vec![(0, reply)], sum[0], true))
        }
    });
    let (got, sum, none_left) = &runs[0].value;
    assert_eq!(*sum, 3.0);
    assert!(*none_left);
    assert_eq!(got.len(), 6);
    for sender in [1usize, 2] {
        let seq: Vec<&Vec<u8>> = got
            .iter()
            .filter(|(s, _)| *s == sender)
            .map(|(_, b)| b)
            .collect();
        let s = sender as u8;
        assert_eq!(seq, [&vec![s, 0], &vec![s, 1], &vec![s, 2, 9, 9]]);
    }
    assert_eq!(runs[1].value.0[0].1, b"bye");
    // Point-to-point bytes are not counted: only the all-reduce's words are.
    assert_eq!(runs[0].stats.phase(Phase::Replication).volume(), [0; 4]);
    assert_eq!(runs[0].stats.phase(Phase::Propagation).volume(), [0; 4]);
}

#[test]
fn waiting_for_a_message_from_ranks_that_finished_is_an_error() {
    let out = run_threads(2, |c| {
        if c.rank() == 0 {
            c.receive_bytes(None).map(|_| ())
        } else {
            Ok(())
        }
    });
    let failure = out.unwrap_err();
    assert_eq!(failure.rank, 0);
    assert!(matches!(failure.error, CommError::PeerExited { .. }));
    let bad = run_threads(2, |c| c.send_bytes(2, b"x"));
    assert!(matches!(bad.unwrap_err().error, CommError::Usage { .. }));
}
