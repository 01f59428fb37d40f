//! Running again the runs the hypervisor stole from (`--rerun-stolen`, `--rerun-budget`).
//!
//! Steal slows mpbond's user-space relays where the kernel's MPTCP does not
//! (docs/evaluation.md, "A busy host"): a lab on a shared host measures the host in such a
//! run, which a deployment, each device with its own CPU, would not meet. So a run with more
//! than [`crate::cpu::STEAL_LIMIT`] of a core stolen may be run again. The choice looks at
//! the steal alone, never at what the run measured.
//!
//! The reruns wait until a batch (one scenario's runs) is done, and then go to the most
//! stolen runs first. Run at once, a rerun met the same burst of steal as the run it
//! replaced: in the suite at d2d7cc7 ten of 10a's runs stayed stolen because their one
//! rerun came within the same half minute. Waiting also hands a tight budget to the runs the
//! host took most from rather than to whichever came first.
//!
//! A budget alone is first come, first served: in the suite at 0f4cffe a burst of steal in
//! 07 spent all 6 minutes, and the 42 stolen runs of 07-09 after it kept their steal. With a
//! share (`--rerun-share`) each batch earns rerun time in proportion to the wall time of its
//! own first attempts, since the steal a batch meets grows with the time it runs, and what a
//! batch leaves of its earnings carries over to the batches after it. A burst then takes
//! what its batch and the quiet ones before it earned, never the later batches' shares.
//! A rerun starts while any of the share is left, and what it takes beyond that is owed,
//! paid from the next batches' earnings before they spend: a batch whose runs each take
//! longer than its share (a 50 s video run against 5% of ten minutes, 30 s) can still run
//! its most stolen run again, and no batch overdraws by more than one run.

use std::time::{Duration, Instant};

use crate::run::RunResult;

/// How far stolen runs are run again, and what the reruns have taken so far.
#[derive(Clone, Debug, Default)]
pub struct Reruns {
    /// Most reruns of one run.
    pub max: usize,
    /// Wall time the reruns may still take over the whole invocation (a suite's, for `lab
    /// paper`); `None` for no limit. A rerun starts only while at least the time of the
    /// attempt before it is left, so the invocation overruns its budget by less than one run.
    pub budget: Option<Duration>,
    /// The budget as it was given, for the report.
    granted: Option<Duration>,
    /// The fraction of a batch's first attempts' wall time the batch earns for its reruns
    /// (`--rerun-share`); `None` for no share, the budget alone deciding.
    share: Option<f64>,
    /// Rerun time earned by the batches so far and not yet spent (with a share).
    earned: Duration,
    /// Rerun time spent beyond what was earned, paid from the next earnings (with a share).
    owed: Duration,
    /// What the reruns have done so far.
    pub tally: Tally,
}

/// What the reruns did over a stretch of an invocation ([`Reruns::tally`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tally {
    /// Runs that ran again at least once.
    pub runs: usize,
    /// Reruns, all attempts after a run's first.
    pub attempts: usize,
    /// Wall time the reruns took.
    pub spent: Duration,
    /// Reruns the budget or the share refused (a run stolen from that was not run again).
    pub refused: usize,
    /// Kept runs still above the limit: every attempt allowed was stolen from.
    pub still_stolen: usize,
}

impl Tally {
    /// What was done since `before` (a tally taken earlier from the same [`Reruns`]).
    pub fn since(&self, before: &Tally) -> Tally {
        Tally {
            runs: self.runs - before.runs,
            attempts: self.attempts - before.attempts,
            spent: self.spent.saturating_sub(before.spent),
            refused: self.refused - before.refused,
            still_stolen: self.still_stolen - before.still_stolen,
        }
    }

    /// One clause for a batch's note, e.g. "3 ran again (4 reruns, 12 s), 1 still stolen";
    /// empty when no run was stolen from.
    pub fn clause(&self) -> String {
        if self.runs == 0 && self.refused == 0 && self.still_stolen == 0 {
            return String::new();
        }
        let mut s = format!(
            "{} ran again ({} reruns, {:.0} s)",
            self.runs,
            self.attempts,
            self.spent.as_secs_f64()
        );
        if self.refused > 0 {
            s.push_str(&format!(
                ", {} refused by the budget or the share",
                self.refused
            ));
        }
        if self.still_stolen > 0 {
            s.push_str(&format!(
                ", {} kept still above {:.0}%",
                self.still_stolen,
                100.0 * crate::cpu::STEAL_LIMIT
            ));
        }
        s
    }
}

impl Reruns {
    /// At most `max` reruns of a run, within `budget` of wall time over the invocation.
    pub fn new(max: usize, budget: Option<Duration>) -> Reruns {
        Reruns {
            max,
            budget,
            granted: budget,
            share: None,
            earned: Duration::ZERO,
            owed: Duration::ZERO,
            tally: Tally::default(),
        }
    }

    /// The same, each batch also earning `share` (a fraction in (0, 1]) of its first
    /// attempts' wall time for its reruns, what it leaves carrying over to the next batches.
    pub fn with_share(self, share: f64) -> Reruns {
        Reruns {
            share: Some(share),
            ..self
        }
    }

    /// Credits a batch whose first attempts took `first` with its share (no-op without one),
    /// after what earlier reruns owe.
    fn earn(&mut self, first: Duration) {
        if let Some(f) = self.share {
            let credit = first.mul_f64(f);
            let paid = credit.min(self.owed);
            self.owed -= paid;
            self.earned += credit - paid;
        }
    }

    /// Why one more rerun may not start for a run whose last attempt took `last`: `None`
    /// when it may, else what refused it. It must fit in what is left of the budget, and
    /// some of the share earned so far must be left (what it takes beyond is owed), so that
    /// neither is overrun by more than one run.
    fn refusal(&self, last: Duration) -> Option<String> {
        let fits = |left: Duration| !left.is_zero() && left >= last;
        if let Some(b) = self.budget.filter(|&b| !fits(b)) {
            return Some(format!(
                "the rerun budget has {:.0} s left, less than the run took ({:.0} s)",
                b.as_secs_f64(),
                last.as_secs_f64()
            ));
        }
        if self.share.is_some() && self.earned.is_zero() {
            return Some(format!(
                "nothing is left of the share earned so far ({:.0} s owed by earlier reruns)",
                self.owed.as_secs_f64()
            ));
        }
        None
    }

    /// Counts a rerun's time against the budget and the share earned.
    fn spend(&mut self, took: Duration) {
        self.tally.spent += took;
        if let Some(b) = self.budget.as_mut() {
            *b = b.saturating_sub(took);
        }
        if self.share.is_some() {
            self.owed += took.saturating_sub(self.earned);
            self.earned = self.earned.saturating_sub(took);
        }
    }

    /// The invocation's line on its reruns, for a summary: how many, how long, what is left
    /// of the budget and how many runs stayed stolen; `None` without `--rerun-stolen`.
    pub fn summary(&self) -> Option<String> {
        if self.max == 0 {
            return None;
        }
        let t = &self.tally;
        let budget = match (self.granted, self.budget) {
            (Some(g), Some(left)) => format!(
                "; {:.0} s of the budget's {:.0} s left, {} refused",
                left.as_secs_f64(),
                g.as_secs_f64(),
                t.refused
            ),
            _ => "; no budget".to_string(),
        };
        let share = self.share.map_or(String::new(), |f| {
            let owed = if self.owed.is_zero() {
                String::new()
            } else {
                format!(
                    ", {:.0} s owed by reruns beyond it",
                    self.owed.as_secs_f64()
                )
            };
            format!(
                "; each experiment earning {:.1}% of its first attempts' time, {:.0} s earned and not spent{owed}",
                100.0 * f,
                self.earned.as_secs_f64()
            )
        });
        Some(format!(
            "Reruns (at most {} a run): {} runs ran again, {} reruns in {:.0} s{budget}{share}; {} kept runs still above {:.0}% stolen.",
            self.max,
            t.runs,
            t.attempts,
            t.spent.as_secs_f64(),
            t.still_stolen,
            100.0 * crate::cpu::STEAL_LIMIT
        ))
    }
}

/// A finished run of a batch and the wall time it took (what a rerun of it would cost).
pub struct Done {
    /// The run as it came.
    pub result: RunResult,
    /// Its wall time.
    pub took: Duration,
}

/// Runs again, after a batch, the runs of `batch` the hypervisor stole more than
/// [`crate::cpu::STEAL_LIMIT`] of a core from ([`RunResult::stolen`]): in rounds, each
/// round the runs whose every attempt so far was stolen, most stolen first, at most
/// `reruns.max` rounds, each rerun while `reruns.budget` and the share earned last (its wall
/// time is taken from both; the batch first earns its share of its runs' `took`).
/// `attempt(i, k)` runs run `i` of the batch again as its attempt `k` (from 1); `label(i)`
/// names it in the lines each rerun prints and `headline` says what a rerun measured.
///
/// Returns, in the batch's order, each run kept with the attempts set aside: the quiet
/// attempt if one was (the last, since a quiet one ends its reruns), or else the least
/// stolen, so a host busy for longer than the reruns costs only time. The kept run records
/// the steal of the attempts set aside ([`RunResult::set_aside_steal`]).
pub fn rerun_stolen(
    reruns: &mut Reruns,
    batch: Vec<Done>,
    label: impl Fn(usize) -> String,
    headline: impl Fn(&RunResult) -> String,
    mut attempt: impl FnMut(usize, usize) -> anyhow::Result<RunResult>,
) -> anyhow::Result<Vec<(RunResult, Vec<RunResult>)>> {
    let steal = |r: &RunResult| r.steal_share().unwrap_or(0.0);
    reruns.earn(batch.iter().map(|d| d.took).sum());
    let (mut tries, mut took): (Vec<Vec<RunResult>>, Vec<Duration>) =
        batch.into_iter().map(|d| (vec![d.result], d.took)).unzip();
    for round in 1..=reruns.max {
        // The runs whose every attempt so far was stolen, the most stolen first.
        let mut due: Vec<usize> = (0..tries.len())
            .filter(|&i| tries[i].len() == round && tries[i].last().is_some_and(|r| r.stolen()))
            .collect();
        due.sort_by(|&a, &b| {
            let s = |i: usize| tries[i].last().map_or(0.0, steal);
            s(b).total_cmp(&s(a))
        });
        for i in due {
            let stolen = 100.0 * tries[i].last().map_or(0.0, steal);
            if let Some(why) = reruns.refusal(took[i]) {
                eprintln!(
                    "lab: {}: the hypervisor stole {stolen:.1}% of a core from this run; not run again: {why}",
                    label(i)
                );
                reruns.tally.refused += 1;
                continue;
            }
            eprintln!(
                "lab: {}: the hypervisor stole {stolen:.1}% of a core from this run; running it again ({round} of {})",
                label(i),
                reruns.max
            );
            let t = Instant::now();
            let r = attempt(i, round)?;
            let d = t.elapsed();
            reruns.spend(d);
            reruns.tally.attempts += 1;
            reruns.tally.runs += usize::from(round == 1);
            eprintln!(
                "lab: {}, run again: {}, {:.1}% stolen",
                label(i),
                headline(&r),
                100.0 * steal(&r)
            );
            took[i] = d;
            tries[i].push(r);
        }
    }
    Ok(tries
        .into_iter()
        .map(|mut tries| {
            let keep = tries
                .iter()
                .position(|r| !r.stolen())
                .or_else(|| {
                    (0..tries.len()).min_by(|&a, &b| steal(&tries[a]).total_cmp(&steal(&tries[b])))
                })
                .unwrap_or(0);
            let mut kept = tries.remove(keep);
            kept.set_aside_steal = tries.iter().map(steal).collect();
            reruns.tally.still_stolen += usize::from(kept.stolen());
            (kept, tries)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run whose hypervisor stole `steal` of a core over a 10 s window and that took
    /// `seconds` (which the choice must ignore).
    fn run(steal: f64, seconds: f64) -> RunResult {
        let mut r = crate::claim::tests::run("mpbond", 1_000_000, seconds, 1.0);
        r.host_cpu = Some(crate::cpu::HostCpu {
            steal_s: steal * 10.0,
            window_s: 10.0,
            ..Default::default()
        });
        r
    }

    /// A batch of first attempts with these steals, run `i` taking `i + 1` s; the attempts
    /// after them take 10 s, 20 s, ... in the order they are asked for.
    fn batch(steals: &[f64]) -> Vec<Done> {
        steals
            .iter()
            .enumerate()
            .map(|(i, &s)| Done {
                result: run(s, 1.0 + i as f64),
                took: Duration::from_millis(1),
            })
            .collect()
    }

    fn secs(rs: &[RunResult]) -> Vec<f64> {
        rs.iter().map(|r| r.seconds).collect()
    }

    /// The reruns look at the steal alone: a run runs again while its attempts were stolen,
    /// the first quiet attempt is kept, or, when every allowed attempt was stolen, the least
    /// stolen; every attempt set aside comes back, and the kept run records their steal.
    #[test]
    fn stolen_runs_run_again_and_a_quiet_attempt_is_kept() {
        // Run 0 quiet; run 1 stolen, then quiet; run 2 stolen three times (0.2, 0.05, 0.1).
        let later: [&[f64]; 3] = [&[], &[0.0, 0.0], &[0.05, 0.1]];
        let mut asked = Vec::new();
        let mut reruns = Reruns::new(2, None);
        let kept = rerun_stolen(
            &mut reruns,
            batch(&[0.01, 0.1, 0.2]),
            |i| format!("run {i}"),
            |r| format!("{:.1} s", r.seconds),
            |i, k| {
                asked.push((i, k));
                Ok(run(later[i][k - 1], 10.0 * (asked.len() as f64)))
            },
        )
        .unwrap();
        // Round 1, the most stolen first; round 2 only the run still stolen.
        assert_eq!(asked, [(2, 1), (1, 1), (2, 2)]);
        assert_eq!(secs(&[kept[0].0.clone()]), [1.0]);
        assert!(kept[0].1.is_empty() && kept[0].0.set_aside_steal.is_empty());
        // Run 1: its quiet rerun kept, the stolen first attempt set aside.
        assert_eq!((kept[1].0.seconds, secs(&kept[1].1)), (20.0, vec![2.0]));
        assert_eq!(kept[1].0.set_aside_steal.len(), 1);
        assert!((kept[1].0.set_aside_steal[0] - 0.1).abs() < 1e-9);
        // Run 2: stolen every time, the least stolen (its first rerun) kept.
        assert_eq!(
            (kept[2].0.seconds, secs(&kept[2].1)),
            (10.0, vec![3.0, 30.0])
        );
        let t = reruns.tally;
        assert_eq!(
            (t.runs, t.attempts, t.refused, t.still_stolen),
            (2, 3, 0, 1)
        );
        let line = reruns.summary().unwrap();
        assert!(line.contains("2 runs ran again, 3 reruns"), "{line}");
        assert!(line.contains("no budget") && line.contains("1 kept runs still above 3%"));
    }

    /// Without `--rerun-stolen` nothing runs again and there is no summary line; a failed
    /// rerun fails the batch.
    #[test]
    fn no_reruns_or_a_failed_one() {
        let mut none = Reruns::default();
        let kept = rerun_stolen(
            &mut none,
            batch(&[0.5]),
            |_| String::new(),
            |_| String::new(),
            |_, _| panic!("no rerun was allowed"),
        )
        .unwrap();
        assert_eq!((kept[0].0.seconds, kept[0].1.len()), (1.0, 0));
        assert_eq!(none.tally.still_stolen, 1);
        assert!(none.summary().is_none());

        let r = rerun_stolen(
            &mut Reruns::new(3, None),
            batch(&[0.5]),
            |_| String::new(),
            |_| String::new(),
            |_, _| anyhow::bail!("the origin did not answer"),
        );
        assert!(r.is_err());
    }

    /// The budget: a spent one runs nothing again and counts the refusals; one left runs
    /// the most stolen first, takes the reruns' wall time off, and refuses a run that took
    /// longer than what is left.
    #[test]
    fn the_budget_goes_to_the_most_stolen_runs() {
        let mut spent = Reruns::new(3, Some(Duration::ZERO));
        let kept = rerun_stolen(
            &mut spent,
            batch(&[0.2, 0.3]),
            |_| String::new(),
            |_| String::new(),
            |_, _| panic!("the budget was spent"),
        )
        .unwrap();
        assert_eq!(kept.len(), 2);
        assert_eq!((spent.tally.refused, spent.tally.still_stolen), (2, 2));
        assert!(spent
            .summary()
            .unwrap()
            .contains("0 s of the budget's 0 s left, 2 refused"));

        // 10 s left, and a run whose first attempt took 60 s: it no longer fits, the others
        // (1 ms each) do, the most stolen first; each rerun's 2 ms come off the budget.
        let budget = Duration::from_secs(10);
        let mut tight = Reruns::new(1, Some(budget));
        let mut asked = Vec::new();
        let mut b = batch(&[0.1, 0.4, 0.2]);
        b[2].took = Duration::from_secs(60);
        let kept = rerun_stolen(
            &mut tight,
            b,
            |_| String::new(),
            |_| String::new(),
            |i, _| {
                std::thread::sleep(Duration::from_millis(2));
                asked.push(i);
                Ok(run(0.0, 9.0))
            },
        )
        .unwrap();
        assert_eq!(asked, [1, 0]);
        assert_eq!(
            secs(&kept.iter().map(|k| k.0.clone()).collect::<Vec<_>>()),
            [9.0, 9.0, 3.0]
        );
        let t = tight.tally;
        assert_eq!(
            (t.runs, t.attempts, t.refused, t.still_stolen),
            (2, 2, 1, 1)
        );
        assert!(
            t.spent >= Duration::from_millis(4) && t.spent < budget,
            "{:?}",
            t.spent
        );
        assert_eq!(tight.budget, Some(budget - t.spent));
        let since = t.since(&Tally {
            runs: 1,
            attempts: 1,
            ..Tally::default()
        });
        assert_eq!((since.runs, since.attempts), (1, 1));
        assert!(since.clause().starts_with("1 ran again (1 reruns"));
    }

    /// A batch of first attempts with these steals, each taking `took_ms`.
    fn timed(steals: &[f64], took_ms: u64) -> Vec<Done> {
        let mut b = batch(steals);
        for d in &mut b {
            d.took = Duration::from_millis(took_ms);
        }
        b
    }

    /// With a share each batch earns that fraction of its first attempts' time. A burst in
    /// one batch reruns while its earnings last (the most stolen first), the last rerun
    /// overdrawing them; the debt is paid from the next batches' earnings before they can
    /// rerun anything; a batch whose one run is longer than its whole share still reruns it
    /// once something is left; the summary says what is left and what is owed.
    #[test]
    fn a_share_keeps_a_burst_from_spending_the_later_batches_reruns() {
        let ms = Duration::from_millis;
        let mut reruns = Reruns::new(1, None).with_share(0.5);
        // Runs a batch and returns the runs asked to run again.
        let go = |reruns: &mut Reruns, b: Vec<Done>, sleep_ms: u64| {
            let mut here = Vec::new();
            rerun_stolen(
                reruns,
                b,
                |_| String::new(),
                |_| String::new(),
                |i, _| {
                    std::thread::sleep(ms(sleep_ms));
                    here.push(i);
                    Ok(run(0.0, 9.0))
                },
            )
            .unwrap();
            here
        };
        // The burst: three stolen runs of 100 ms earn 150 ms. The most stolen reruns in 80
        // ms, the next with the 70 ms left and overdraws; nothing is left for the third.
        assert_eq!(go(&mut reruns, timed(&[0.2, 0.3, 0.1], 100), 80), [1, 0]);
        assert_eq!((reruns.tally.attempts, reruns.tally.refused), (2, 1));
        assert_eq!(reruns.earned, Duration::ZERO);
        let owed = reruns.owed;
        assert!(owed >= ms(10) && owed < ms(150), "{owed:?}");
        // A stolen run of 10 ms earns 5 ms, which goes to the debt: refused.
        assert!(go(&mut reruns, timed(&[0.4], 10), 1).is_empty());
        assert_eq!(reruns.tally.refused, 2);
        assert_eq!(reruns.owed, owed - ms(5));
        // A quiet batch earns 150 ms, pays the rest of the debt and keeps the remainder.
        assert!(go(&mut reruns, timed(&[0.0, 0.01, 0.0], 100), 1).is_empty());
        assert_eq!(reruns.owed, Duration::ZERO);
        assert_eq!(reruns.earned, ms(150) - (owed - ms(5)));
        let line = reruns.summary().unwrap();
        assert!(
            line.contains("each experiment earning 50.0% of its first attempts' time"),
            "{line}"
        );

        // A batch of one long run (a video) earns less than the run took; it still runs
        // again once, and owes the difference.
        let mut video = Reruns::new(1, None).with_share(0.05);
        assert_eq!(go(&mut video, timed(&[0.09], 400), 40), [0]);
        assert_eq!(video.earned, Duration::ZERO);
        assert!(video.owed >= ms(20), "{:?}", video.owed);
        assert!(video.summary().unwrap().contains("owed"));

        // Without a share the same burst is first come, first served: all three run again.
        let mut open = Reruns::new(1, Some(Duration::from_secs(60)));
        let kept = rerun_stolen(
            &mut open,
            timed(&[0.2, 0.3, 0.1], 10),
            |_| String::new(),
            |_| String::new(),
            |_, _| Ok(run(0.0, 9.0)),
        )
        .unwrap();
        assert_eq!(
            (kept.len(), open.tally.attempts, open.tally.refused),
            (3, 3, 0)
        );
    }
}
