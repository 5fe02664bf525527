package loadgen

import "testing"

func TestStatesWrittenScalesTheSampledShare(t *testing.T) {
	for _, c := range []struct {
		audit      RecordAudit
		sent, want int64
	}{
		{RecordAudit{Checked: 500, Missing: 450}, 50_000, 5_000}, // most answered from the sold-out hint
		{RecordAudit{Checked: 500}, 50_000, 50_000},              // every order ran the script
		{RecordAudit{Checked: 500, Missing: 500}, 50_000, 0},
		{RecordAudit{}, 10, 10}, // nothing sampled: assume every order left one
	} {
		if got := statesWritten(c.audit, c.sent); got != c.want {
			t.Errorf("statesWritten(%+v, %d) = %d, want %d", c.audit, c.sent, got, c.want)
		}
	}
}

func TestPresentIsTheShareOfCheckedKeysThatExist(t *testing.T) {
	for _, c := range []struct {
		audit RecordAudit
		want  float64
	}{
		{RecordAudit{Checked: 500}, 1},
		{RecordAudit{Checked: 500, Missing: 450}, 0.1},
		{RecordAudit{Checked: 500, Missing: 500}, 0},
		{RecordAudit{}, 0}, // nothing checked, nothing known to be there
	} {
		if got := c.audit.Present(); got != c.want {
			t.Errorf("%+v.Present() = %v, want %v", c.audit, got, c.want)
		}
	}
}
