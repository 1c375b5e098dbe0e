// Package explain renders and explains a simulator run: its summary (Report, ending with the
// trace digest, and Machine, the layer whose promise a violation broke), and, by running its
// seed again, a focused report (Explain: the last events of each entity a violation names),
// a timeline page (WriteTimeline) and a shrink (Shrink: a search over sim/config's shrink
// tokens for a smaller run that breaks the same invariant). None of it changes a run: a sweep
// pays nothing for it, and everything it writes is a function of the seed, the profile and
// the code.
package explain
