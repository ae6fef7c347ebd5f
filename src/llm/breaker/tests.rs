use super::*;
use crate::llm::LlmConfig;
use proptest::prelude::*;

const NS: Duration = Duration::from_nanos(1);

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The client's breaker as a default `[llm]` makes it.
fn client_default() -> Breaker {
    let config: LlmConfig =
        serde_json::from_value(serde_json::json!({"provider": "openai", "model": "m"})).unwrap();
    config.breaker()
}

#[tokio::test]
async fn attempts_in_flight_and_failures_never_exceed_the_threshold() {
    let b = Breaker::new(3, secs(60), Policy::Probe);
    let t1 = b.admit().await.unwrap();
    let t2 = b.admit().await.unwrap();
    t1.failed();
    let t3 = b.admit().await.unwrap();
    // 1 failure + 2 in flight: a fourth attempt waits (it is not admitted yet).
    let waiting = tokio::spawn({
        let b = b.clone();
        async move { b.admit().await.map(|t| t.failed()) }
    });
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished());
    t2.failed();
    t3.failed();
    // Three failures: open; the waiter is refused, not sent.
    assert!(matches!(waiting.await.unwrap(), Err(Refused::Open(_))));
    assert!(b.open_for(Instant::now()).is_some());
}

#[tokio::test]
async fn a_probe_goes_alone_and_its_success_closes() {
    // A cool-down of 0: cooled as soon as it opens.
    let b = Breaker::new(1, Duration::ZERO, Policy::Probe);
    b.admit().await.unwrap().failed();
    let probe = b.admit().await.unwrap();
    assert_eq!(b.admit().await.err(), Some(Refused::Probing));
    probe.succeeded();
    b.admit().await.unwrap().succeeded();
    assert_eq!(b.open_for(Instant::now()), None);
}

#[tokio::test]
async fn a_dropped_ticket_counts_as_a_failure() {
    let b = Breaker::new(1, secs(60), Policy::Probe);
    drop(b.admit().await.unwrap());
    assert!(matches!(b.admit().await, Err(Refused::Open(_))));
}

#[test]
fn the_clients_breaker_opens_after_5_failures_for_30_s_then_sends_one_probe() {
    let b = client_default();
    let mut c = b.lock();
    assert_eq!(
        (c.threshold, c.cooldown, c.policy),
        (5, secs(30), Policy::Probe)
    );
    let t0 = Instant::now();
    // Five attempts in flight: a sixth waits for one to end.
    for _ in 0..5 {
        assert_eq!(c.admit(t0), Admission::Admitted);
    }
    assert_eq!(c.admit(t0), Admission::Wait);
    // Four fail: four failures and one in flight, still no room.
    for _ in 0..4 {
        c.end(t0, false);
    }
    assert_eq!(c.admit(t0), Admission::Wait);
    assert_eq!(c.open_for(t0), None);
    // The fifth failure opens it for 30 s; it refuses until they have fully passed.
    let t1 = t0 + secs(1);
    c.end(t1, false);
    assert_eq!(c.admit(t1), Admission::Refused(Refused::Open(secs(30))));
    assert_eq!(
        c.admit(t1 + secs(30) - NS),
        Admission::Refused(Refused::Open(NS))
    );
    // Cooled: one probe goes, every other attempt is refused while it is out.
    let t2 = t1 + secs(30);
    assert_eq!(c.open_for(t2), None);
    assert_eq!(c.admit(t2), Admission::Admitted);
    assert_eq!(c.admit(t2), Admission::Refused(Refused::Probing));
    assert_eq!(
        c.admit(t2 + secs(100)),
        Admission::Refused(Refused::Probing)
    );
    // The probe fails: open again, 30 s from that failure.
    let t3 = t2 + secs(2);
    c.end(t3, false);
    assert_eq!(
        c.admit(t3 + secs(10)),
        Admission::Refused(Refused::Open(secs(20)))
    );
    // The next probe succeeds: closed, with room for five again.
    let t4 = t3 + secs(30);
    assert_eq!(c.admit(t4), Admission::Admitted);
    c.end(t4, true);
    for _ in 0..5 {
        assert_eq!(c.admit(t4), Admission::Admitted);
    }
    assert_eq!(c.admit(t4), Admission::Wait);
    // Four failures, a success: the count starts again, four more do not open it.
    for ok in [false, false, false, false, true] {
        c.end(t4, ok);
    }
    for _ in 0..4 {
        assert_eq!(c.admit(t4), Admission::Admitted);
        c.end(t4, false);
    }
    assert_eq!(c.open_for(t4), None);
    assert_eq!(c.in_flight, 0);
}

#[test]
fn a_threshold_of_0_never_opens_nor_bounds_the_attempts_in_flight() {
    let b = Breaker::new(0, secs(30), Policy::Probe);
    let mut c = b.lock();
    let t = Instant::now();
    for _ in 0..100 {
        assert_eq!(c.admit(t), Admission::Admitted);
    }
    for _ in 0..100 {
        c.end(t, false);
    }
    assert_eq!(c.admit(t), Admission::Admitted);
    drop(c);
    let b = Breaker::new(0, secs(300), Policy::NoProbe);
    for _ in 0..100 {
        b.record(t, false);
    }
    assert_eq!(b.open_for(t), None);
}

/// How far the clock moves, relative to the cool-down when named so.
#[derive(Debug, Clone, Copy)]
enum Step {
    Nano,
    JustUnderCooldown,
    Cooldown,
    JustOverCooldown,
    Millis(u32),
}

#[derive(Debug, Clone, Copy)]
enum Op {
    /// The clock moves on.
    Tick(Step),
    /// [`Policy::Probe`]: an attempt asks to go.
    Admit,
    /// [`Policy::Probe`]: the attempt in flight `which` (modulo their number) ends.
    End { which: usize, ok: bool },
    /// [`Policy::NoProbe`]: a call's outcome.
    Record(bool),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        Just(Step::Nano),
        Just(Step::JustUnderCooldown),
        Just(Step::Cooldown),
        Just(Step::JustOverCooldown),
        (0u32..5_000).prop_map(Step::Millis),
    ]
}

fn cooldown() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(NS),
        Just(secs(30)),
        Just(secs(300)),
        (0u64..3_000).prop_map(Duration::from_millis),
    ]
}

fn threshold() -> impl Strategy<Value = u32> {
    prop_oneof![Just(3u32), Just(5), 0u32..7]
}

/// What the breaker should say, from the outcomes alone: open iff the threshold is not 0, at
/// least that many consecutive failures ended the outcomes so far, and the cool-down has not
/// passed since the last of them (its last instant included under [`Policy::NoProbe`]).
#[derive(Debug)]
struct Spec {
    threshold: u32,
    cooldown: Duration,
    policy: Policy,
    failures: u32,
    last_failure: Option<Instant>,
}

impl Spec {
    fn outcome(&mut self, now: Instant, ok: bool) {
        if ok {
            self.failures = 0;
        } else {
            self.failures += 1;
            self.last_failure = Some(now);
        }
    }

    fn tripped(&self) -> bool {
        self.threshold > 0 && self.failures >= self.threshold
    }

    fn open_for(&self, now: Instant) -> Option<Duration> {
        let at = self.last_failure.filter(|_| self.tripped())?;
        let passed = now - at;
        let open = match self.policy {
            Policy::Probe => passed < self.cooldown,
            Policy::NoProbe => passed <= self.cooldown,
        };
        open.then(|| self.cooldown - passed)
    }
}

fn advance(now: Instant, step: Step, cooldown: Duration) -> Instant {
    now + match step {
        Step::Nano => NS,
        Step::JustUnderCooldown => cooldown.saturating_sub(NS),
        Step::Cooldown => cooldown,
        Step::JustOverCooldown => cooldown + NS,
        Step::Millis(ms) => Duration::from_millis(u64::from(ms)),
    }
}

proptest! {
    /// The LLM client's breaker, per attempt: open as [`Spec`] says; while closed an attempt
    /// goes only with room (failures + attempts in flight under the threshold); once cooled,
    /// one probe at a time.
    #[test]
    fn per_attempt_with_a_probe_the_breaker_opens_and_admits_as_specified(
        threshold in threshold(),
        cooldown in cooldown(),
        ops in proptest::collection::vec(prop_oneof![
            step().prop_map(Op::Tick),
            Just(Op::Admit),
            (any::<usize>(), any::<bool>()).prop_map(|(which, ok)| Op::End { which, ok }),
        ], 0..80),
    ) {
        let mut c = Circuit::new(threshold, cooldown, Policy::Probe);
        let mut spec = Spec { threshold, cooldown, policy: Policy::Probe, failures: 0, last_failure: None };
        let mut now = Instant::now();
        // The attempts in flight: whether each is the probe.
        let mut tickets: Vec<bool> = Vec::new();
        for op in ops {
            match op {
                Op::Tick(s) => now = advance(now, s, cooldown),
                Op::Admit => {
                    let probing = tickets.iter().any(|&probe| probe);
                    let want = match spec.open_for(now) {
                        Some(left) => Admission::Refused(Refused::Open(left)),
                        None if spec.tripped() && probing => Admission::Refused(Refused::Probing),
                        None if spec.tripped() => Admission::Admitted,
                        None if threshold > 0
                            && spec.failures + tickets.len() as u32 >= threshold => Admission::Wait,
                        None => Admission::Admitted,
                    };
                    prop_assert_eq!(c.admit(now), want);
                    if want == Admission::Admitted {
                        tickets.push(spec.tripped());
                    }
                }
                Op::End { which, ok } => {
                    if tickets.is_empty() {
                        continue;
                    }
                    tickets.remove(which % tickets.len());
                    c.end(now, ok);
                    spec.outcome(now, ok);
                }
                Op::Record(_) => unreachable!(),
            }
            prop_assert_eq!(c.open_for(now), spec.open_for(now));
            prop_assert_eq!(c.in_flight as usize, tickets.len());
            if threshold > 0 {
                prop_assert!(tickets.len() as u32 <= threshold);
            }
        }
    }

    /// The summary strategy's breaker, after the fact: open as [`Spec`] says, whatever the
    /// order of outcomes and clock.
    #[test]
    fn after_the_fact_without_a_probe_the_breaker_opens_as_specified(
        threshold in threshold(),
        cooldown in cooldown(),
        ops in proptest::collection::vec(prop_oneof![
            step().prop_map(Op::Tick),
            any::<bool>().prop_map(Op::Record),
        ], 0..80),
    ) {
        let b = Breaker::new(threshold, cooldown, Policy::NoProbe);
        let mut spec = Spec { threshold, cooldown, policy: Policy::NoProbe, failures: 0, last_failure: None };
        let mut now = Instant::now();
        for op in ops {
            match op {
                Op::Tick(s) => now = advance(now, s, cooldown),
                Op::Record(ok) => {
                    b.record(now, ok);
                    spec.outcome(now, ok);
                }
                Op::Admit | Op::End { .. } => unreachable!(),
            }
            prop_assert_eq!(b.open_for(now), spec.open_for(now));
        }
    }
}
