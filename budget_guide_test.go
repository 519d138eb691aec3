package retry

// docs/budget.md held to the code: the files and names of its "The code"
// section, the invariant it states about the core, and the numbers it
// (and the Budget's doc comments) give, which are the code's constants.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// guideSection returns the section of docs/budget.md under the heading
// "## title", up to the next heading of that level.
func guideSection(t *testing.T, title string) string {
	t.Helper()
	data, err := os.ReadFile("docs/budget.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(data), "\n## "+title+"\n")
	require.True(t, ok, "docs/budget.md has no section %q", title)
	section, _, _ = strings.Cut(section, "\n## ")
	return section
}

// parsedPackage is the package's files (tests excluded), parsed, by file
// name.
func parsedPackage(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	files := map[string]*ast.File{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		files[name] = f
	}
	return fset, files
}

// declared returns the names each file declares: its types, functions,
// constants and variables, its methods as "Type.method", and its structs'
// fields as "Type.field".
func declared(files map[string]*ast.File) map[string][]string {
	names := map[string][]string{}
	for file, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				name := d.Name.Name
				if d.Recv != nil {
					recv := d.Recv.List[0].Type
					if star, ok := recv.(*ast.StarExpr); ok {
						recv = star.X
					}
					if index, ok := recv.(*ast.IndexExpr); ok { // a generic type's method
						recv = index.X
					}
					name = recv.(*ast.Ident).Name + "." + name
				}
				names[file] = append(names[file], name)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						names[file] = append(names[file], s.Name.Name)
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, field := range st.Fields.List {
								for _, n := range field.Names {
									names[file] = append(names[file], s.Name.Name+"."+n.Name)
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[file] = append(names[file], n.Name)
						}
					}
				}
			}
		}
	}
	return names
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	identifier = regexp.MustCompile(`^[A-Za-z_]\w*(\.[A-Za-z_]\w*)?$`)
)

// TestGuideCodeMap: each row of the table of docs/budget.md's "The code"
// names a file of the package and names declared in that file; every
// budget*.go file has its row; every file and name the section's prose
// quotes exists.
func TestGuideCodeMap(t *testing.T) {
	t.Parallel()
	section := guideSection(t, "The code")
	_, files := parsedPackage(t)
	names := declared(files)
	var all []string
	for _, n := range names {
		all = append(all, n...)
	}

	mapped := map[string]bool{}
	rows := 0
	var prose []string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 || strings.HasPrefix(cells[2], " ---") || strings.TrimSpace(cells[2]) == "File" {
			prose = append(prose, line)
			continue
		}
		rows++
		file := strings.Trim(strings.TrimSpace(cells[2]), "`")
		require.NotNil(t, files[file], "a row names %s, which is no file of the package", file)
		assert.False(t, mapped[file], "%s has two rows", file)
		mapped[file] = true
		quoted := backticked.FindAllStringSubmatch(cells[3], -1)
		assert.NotEmpty(t, quoted, "the row of %s names nothing", file)
		for _, m := range quoted {
			assert.Contains(t, names[file], m[1], "the row of %s names %s, which it does not declare", file, m[1])
		}
	}
	require.Positive(t, rows, "no table in the section")
	for file := range files {
		if strings.HasPrefix(file, "budget") {
			assert.True(t, mapped[file], "%s has no row in the table", file)
		}
	}

	for _, m := range backticked.FindAllStringSubmatch(strings.Join(prose, "\n"), -1) {
		switch q := m[1]; {
		case strings.Contains(q, "*"): // a pattern: budget_*.go
		case strings.HasSuffix(q, ".go"):
			_, err := os.Stat(q)
			assert.NoError(t, err, "the prose names %s", q)
		case identifier.MatchString(q):
			found := slices.ContainsFunc(all, func(n string) bool { return n == q || strings.HasSuffix(n, "."+q) })
			assert.True(t, found, "the prose names %s, which the package does not declare", q)
		}
	}
}

// TestGuideOnlyTheCoreTouchesTheState: as the guide says, no file but
// budget.go reaches into the Budget's window or its table of holds (a
// selector x.window.y or x.holds.y).
func TestGuideOnlyTheCoreTouchesTheState(t *testing.T) {
	t.Parallel()
	fset, files := parsedPackage(t)
	uses := map[string]int{}
	for file, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if inner, ok := sel.X.(*ast.SelectorExpr); ok && (inner.Sel.Name == "window" || inner.Sel.Name == "holds") {
				uses[file]++
				if file != "budget.go" {
					t.Errorf("%s: %s.%s reaches into the Budget's state outside budget.go", fset.Position(sel.Pos()), inner.Sel.Name, sel.Sel.Name)
				}
			}
			return true
		})
	}
	assert.Positive(t, uses["budget.go"], "budget.go uses neither: the check checks nothing")
	assert.Contains(t, declared(files)["budget.go"], "Budget.window")
	assert.Contains(t, declared(files)["budget.go"], "Budget.holds")
}

// docOf returns the doc comment of the declaration or struct field named
// name ("NewBudget", "Budget.Hold") in f.
func docOf(t *testing.T, f *ast.File, name string) string {
	t.Helper()
	typ, field, isField := strings.Cut(name, ".")
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !isField && d.Recv == nil && d.Name.Name == name {
				return d.Doc.Text()
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				s, ok := spec.(*ast.TypeSpec)
				if !ok || s.Name.Name != typ {
					continue
				}
				if !isField {
					return d.Doc.Text()
				}
				for _, fl := range s.Type.(*ast.StructType).Fields.List {
					for _, n := range fl.Names {
						if n.Name == field {
							return fl.Doc.Text()
						}
					}
				}
			}
		}
	}
	t.Fatalf("no doc comment for %s", name)
	return ""
}

// probeTimes returns, for a hold of Hold hold whose every probe fails and
// whose every draw of Rand is r, the waits before its probes and their
// times after its start, for the probes that go before until.
func probeTimes(hold time.Duration, r float64, until time.Duration) (waits, times []time.Duration) {
	t := newHoldTiming(hold, func() float64 { return r })
	start := time.Unix(0, 0)
	var h scopeHold
	h.start(start, t)
	prev := start
	for id := uint64(1); ; id++ {
		now := h.wake()
		if now.Sub(start) >= until || !h.letProbe(now, id, t) {
			return waits, times
		}
		waits = append(waits, now.Sub(prev))
		times = append(times, now.Sub(start))
		prev = now
		h.probeEnded(id, true, t)
	}
}

// seconds writes ds as the guide does: "0.1, 0.2, 0.4".
func seconds(ds ...time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	}
	return strings.Join(s, ", ")
}

// TestGuideNumbers: the numbers docs/budget.md and the doc comments of
// Budget.Hold, Budget.OnHold and NewBudget give are the code's: the
// failures that start a hold and their span, the probe interval's cap,
// NewBudget's fields and probe waits (whole, halved, on average), the
// reminders' times, the tables' sizes, the window's sub-windows.
func TestGuideNumbers(t *testing.T) {
	t.Parallel()
	guide, err := os.ReadFile("docs/budget.md")
	require.NoError(t, err)
	_, files := parsedPackage(t)
	holdDoc := docOf(t, files["budget.go"], "Budget.Hold")
	onHoldDoc := docOf(t, files["budget.go"], "Budget.OnHold")
	newDoc := docOf(t, files["budget.go"], "NewBudget")

	// What the code says, written as the texts write it.
	const ms = time.Millisecond
	whole := func() float64 { return 1 }
	spanTimes := newHoldTiming(ms, whole).span / ms       // 10 x Hold
	capTimes := newHoldTiming(ms, whole).maxInterval / ms // 5 x Hold ...
	capLimit := newHoldTiming(999*ms, whole).maxInterval  // ... or 1s, whichever is less
	require.Less(t, capLimit, 5*999*ms, "the cap must bind at a Hold of 999ms for the check below")
	nb := NewBudget()
	const outage = 5 * time.Second
	waits, times := probeTimes(nb.Hold, 1, outage) // whole intervals
	halves, halfTimes := probeTimes(nb.Hold, 0, outage)
	_, meanTimes := probeTimes(nb.Hold, 0.5, outage)
	require.Greater(t, len(waits), 4)
	var apart []string // "0.05-0.1": from half to all of each of the first four intervals
	for i := range 4 {
		apart = append(apart, seconds(halves[i])+"-"+seconds(waits[i]))
	}
	var gaps, reminders []string // the reminders' waits after the first, and their times
	at, gap := remindFirst, 2*remindFirst
	for range 5 {
		reminders = append(reminders, strconv.Itoa(int(at.Seconds())))
		if gap < remindMax {
			gaps = append(gaps, strconv.Itoa(int(gap.Seconds()))+" s")
		}
		at, gap = at+gap, min(2*gap, remindMax)
	}
	n := strconv.Itoa
	words := map[int]string{10: "ten"}

	tests := []struct {
		text, pattern string
		want          []string
	}{
		{string(guide), `or (\d+) first attempts of the scope failed transiently within (\d+) x Hold`,
			[]string{n(holdFailures), n(int(spanTimes))}},
		{string(guide), `\*\*(\d+) failures within (\d+) x Hold \((\d+) s\)\.\*\*`,
			[]string{n(holdFailures), n(int(spanTimes)), n(int((spanTimes * nb.Hold).Seconds()))}},
		{string(guide), `up to (\d+) x Hold or (\d+) s, whichever is less`,
			[]string{n(int(capTimes)), n(int(capLimit.Seconds()))}},
		{string(guide), `\*\*The probe cap, (\d+) x Hold \(([\d.]+) s\)\.\*\*`,
			[]string{n(int(capTimes)), seconds(newHoldTiming(nb.Hold, whole).maxInterval)}},
		{string(guide), `at most (\d+) of them`, []string{n(maxScopes)}},
		{string(guide), `The table is full only when (\d+) scopes`, []string{n(maxScopes)}},
		{string(guide), `(\d+) sets of (\d+) entries`, []string{n(resendSets), n(resendWays)}},
		{string(guide), `kept in (\w+) sub-windows of Window/(\d+)`, []string{words[windowSlots], n(windowSlots)}},
		{string(guide), "`NewBudget\\(\\)` is `Ratio ([\\d.]+), MinPerSecond ([\\d.]+), Window (\\w+), Hold (\\w+)`",
			[]string{fmtFloat(nb.Ratio), fmtFloat(nb.MinPerSecond), nb.Window.String(), nb.Hold.String()}},
		{string(guide), `the intervals are ([\d., ]+), then ([\d.]+) s, so the probes go ([\d.-]+), then ([\d.-]+), ([\d.-]+) and ([\d.-]+) s apart: (\d+) to (\d+) in a 5 s outage whose start starts the hold \((\d+) for the whole intervals, about (\d+) on average\)`,
			append(append([]string{seconds(waits[:3]...), seconds(waits[3])}, apart...),
				n(len(times)), n(len(halfTimes)), n(len(times)), n(len(meanTimes)))},
		{string(guide), `\*\*Hold 100ms\.\*\* The first probe goes (\d+) to (\d+) ms after the hold starts`,
			[]string{n(int(halves[0] / ms)), n(int(waits[0] / ms))}},
		{string(guide), `A reminder comes with a failed probe (\d+) s after the start, then after waits doubling, ([\d s,]+), up to every (\d+) minutes \(at ([\d, ]+) s \.\.\.\)`,
			[]string{n(int(remindFirst.Seconds())), strings.Join(gaps, ", "), n(int(remindMax.Minutes())), strings.Join(reminders, ", ")}},
		{holdDoc, `(\d+) first attempts of it fail transiently within (\d+) x Hold`, []string{n(holdFailures), n(int(spanTimes))}},
		{holdDoc, `doubles up to (\d+) x Hold or (\d+)s, whichever is less`, []string{n(int(capTimes)), n(int(capLimit.Seconds()))}},
		{onHoldDoc, `failed probe (\d+)s after the start, then after waits doubling up to (\d+) minutes`,
			[]string{n(int(remindFirst.Seconds())), n(int(remindMax.Minutes()))}},
		{newDoc, `Ratio ([\d.]+), MinPerSecond ([\d.]+), Window (\w+) and Hold (\w+) \(so its probes wait from half to all of ([\d., ]+), then ([\d.]+)s each\)`,
			[]string{fmtFloat(nb.Ratio), fmtFloat(nb.MinPerSecond), nb.Window.String(), nb.Hold.String(), seconds(waits[:3]...), seconds(waits[3])}},
	}
	for _, tt := range tests {
		text := strings.Join(strings.Fields(tt.text), " ") // a sentence may span lines
		m := regexp.MustCompile(tt.pattern).FindStringSubmatch(text)
		if !assert.NotNil(t, m, "no text matches %s", tt.pattern) {
			continue
		}
		assert.Equal(t, tt.want, m[1:], "%s", m[0])
	}
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
