package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// The schedule is a Poisson process: the same seed gives the same arrivals, another seed others; the
// count and the mean gap agree with the rate (bounds of 6 standard deviations: a false failure is
// practically impossible, a wrong rate or a fixed gap is caught).
func TestScheduleIsPoissonAtTheRateAndSeeded(t *testing.T) {
	const rate, d = 1000.0, 20 * time.Second
	a := schedule(rate, d, 1)
	if !slices.Equal(a, schedule(rate, d, 1)) || slices.Equal(a[:100], schedule(rate, d, 2)[:100]) {
		t.Fatal("the seed does not decide the arrivals")
	}
	mean := rate * d.Seconds()
	if n := float64(len(a)); math.Abs(n-mean) > 6*math.Sqrt(mean) {
		t.Fatalf("%d arrivals, expected about %.0f", len(a), mean)
	}
	if !slices.IsSorted(a) || a[0] < 0 || a[len(a)-1] >= d {
		t.Fatal("arrivals out of order or outside [0, d)")
	}
	// exponential gaps: their standard deviation equals their mean (a fixed gap would have none)
	var sum, sq float64
	for i := 1; i < len(a); i++ {
		g := (a[i] - a[i-1]).Seconds()
		sum += g
		sq += g * g
	}
	n := float64(len(a) - 1)
	m := sum / n
	sd := math.Sqrt(sq/n - m*m)
	if math.Abs(m-1/rate) > 6/rate/math.Sqrt(n) || math.Abs(sd/m-1) > 0.1 {
		t.Fatalf("gaps: mean %.6f s, sd/mean %.3f; want %.6f and 1", m, sd/m, 1/rate)
	}
}

func TestQuantileInterpolatesLikeNumpy(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 10}
	for _, c := range []struct{ q, want float64 }{{0.5, 3}, {0.9, 7.6}, {0.99, 9.76}, {1, 10}, {0, 1}} {
		if got := quantile(xs, c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("q %.2f: got %v want %v", c.q, got, c.want)
		}
	}
	if quantile([]float64{5}, 0.99) != 5 {
		t.Error("one value")
	}
}

// Latency runs from the scheduled arrival (the generator's own lag counts), service from the dial;
// skipped arrivals are neither started nor failures; the group is the earliest completion's.
func TestSummaryCountsFromTheScheduledArrival(t *testing.T) {
	t0 := time.Now()
	ms := time.Millisecond
	arrivals := []time.Duration{10 * ms, 20 * ms, 30 * ms, 40 * ms}
	results := []result{
		{started: true, completed: true, start: t0.Add(15 * ms), done: t0.Add(25 * ms), kex: "late"},
		{started: true, completed: true, start: t0.Add(20 * ms), done: t0.Add(22 * ms), kex: "first"},
		{started: true, class: "connect_refused", start: t0.Add(31 * ms)},
		{}, // skipped
	}
	o := options{rate: 100, durationMs: 50, latencies: true}
	s := summarise(o, arrivals, results, t0, 3, 0.5)
	if s.Scheduled != 4 || s.Started != 3 || s.Completed != 2 || s.Skipped != 1 || s.InflightMax != 3 {
		t.Fatalf("counts: %+v", s)
	}
	if len(s.Failures) != 1 || s.Failures["connect_refused"] != 1 {
		t.Fatalf("failures: %v", s.Failures)
	}
	if !slices.Equal(*s.LatenciesMs, []float64{15, 2}) {
		t.Fatalf("latencies (arrival order): %v", *s.LatenciesMs)
	}
	if s.LatencyMs.Max != 15 || s.LatencyMs.Mean != 8.5 || s.ServiceMs.P50 != 6 || s.StartLagMs.Max != 5 {
		t.Fatalf("latency %+v service %+v lag %+v", *s.LatencyMs, *s.ServiceMs, *s.StartLagMs)
	}
	if *s.Group != "first" || *s.WallS != 0.015 || s.AchievedRate != 40 || s.DurationS != 0.05 {
		t.Fatalf("group %v wall %v achieved %v", *s.Group, *s.WallS, s.AchievedRate)
	}
	none := summarise(options{rate: 1, durationMs: 1000}, arrivals[:1], []result{{started: true, class: "timeout"}}, t0, 1, 0)
	if none.LatencyMs != nil || none.ServiceMs != nil || none.Group != nil || none.WallS != nil || none.LatenciesMs != nil {
		t.Fatalf("nothing completed: %+v", none)
	}
}

func TestBadOptionsNameTheOption(t *testing.T) {
	ok := []string{"--host", "10.0.0.1", "--port", "22", "--kex", "curve25519-sha256", "--rate", "10", "--duration-ms", "100"}
	if _, field, why := parseOptions(ok); field != "" {
		t.Fatalf("good options refused: %s %s", field, why)
	}
	set := func(name, value string) []string {
		args := slices.Clone(ok)
		for i := range args {
			if args[i] == name {
				args[i+1] = value
				return args
			}
		}
		return append(args, name, value)
	}
	for _, c := range []struct {
		args  []string
		field string
	}{
		{set("--host", "example.org"), "--host"},
		{set("--host", "::1"), "--host"},
		{set("--port", "0"), "--port"},
		{set("--kex", "sntrup761x25519-sha512"), "--kex"},
		{set("--rate", "0"), "--rate"},
		{set("--rate", "NaN"), "--rate"},
		{set("--rate", "1e9"), "--rate"},
		{set("--duration-ms", "0"), "--duration-ms"},
		{set("--timeout-ms", "0"), "--timeout-ms"},
		{set("--max-inflight", "0"), "--max-inflight"},
		{set("--seed", "-1"), "-seed"},
		{append(slices.Clone(ok), "extra"), "options"},
	} {
		_, field, why := parseOptions(c.args)
		if !strings.Contains(field+" "+why, c.field) {
			t.Errorf("%v: got %q %q, want %s named", c.args, field, why, c.field)
		}
	}
}
