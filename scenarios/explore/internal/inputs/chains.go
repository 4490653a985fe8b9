package inputs

// maxChainApplies bounds Chains' work: how many changes it applies while
// searching, whatever it finds.
const maxChainApplies = 10000

// Chains returns sequences of 2 to n changes of cs that compose, each
// applying to obj after those before it, at most max of them. A sequence
// keeps the changes' order in cs and touches no value twice: no change in
// it is at or under another's path, and one that adds, removes or
// reorders a list's items counts as touching the whole list. Invalid
// changes are left out. Shorter sequences come first, then in the order of
// their changes' positions in cs; to draw others, pass cs in another order.
//
// Chains does not validate: each change is valid alone, but together they
// may break a rule that spans fields.
func Chains(obj map[string]any, cs []Change, n, max int) [][]Change {
	type usable struct {
		c     Change
		scope path
	}
	var us []usable
	for _, c := range cs {
		p, err := parsePath(c.Path)
		if c.Invalid || err != nil {
			continue
		}
		if (c.Op == OpAddItem || c.Op == OpRemoveItem) && len(p) > 1 {
			p = p[:len(p)-1]
		}
		us = append(us, usable{c, p})
	}
	var (
		out     [][]Change
		applies int
		chain   []int
	)
	overlaps := func(j int) bool {
		for _, i := range chain {
			if us[i].scope.within(us[j].scope) || us[j].scope.within(us[i].scope) {
				return true
			}
		}
		return false
	}
	// extend grows chain, whose changes made state, to length k.
	var extend func(k, from int, state map[string]any)
	extend = func(k, from int, state map[string]any) {
		if len(chain) == k {
			seq := make([]Change, k)
			for i, j := range chain {
				seq[i] = us[j].c
			}
			out = append(out, seq)
			return
		}
		for j := from; j < len(us) && len(out) < max && applies < maxChainApplies; j++ {
			if overlaps(j) {
				continue
			}
			applies++
			next, err := Apply(state, us[j].c)
			if err != nil {
				continue
			}
			chain = append(chain, j)
			extend(k, j+1, next)
			chain = chain[:len(chain)-1]
		}
	}
	for k := 2; k <= n && len(out) < max && applies < maxChainApplies; k++ {
		extend(k, 0, obj)
	}
	return out
}
