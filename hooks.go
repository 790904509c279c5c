package timingwheel

// hooks are the knobs that tests turn, to reach interleavings and
// layouts that are rare on their own. A Hierarchy outside tests has none.
type hooks struct {
	// pick chooses the shard of a new timer (and of a moving one, see
	// moveAlways) instead of the processor's hint.
	pick func() *shard
	// betweenBatches runs between two batches of a cascade or of a sort
	// of the late list, with the shard's lock released.
	betweenBatches func()
	// batch, if positive, is the size of those batches instead of batch.
	batch int
	// moveAlways moves every unarmed timer a Reset arms to the shard
	// pickShard names, not only when its own shard's lock was contended
	// (see Timer.resetTo), so that a model covers timers that change
	// shards.
	moveAlways bool
}

// batchSize is the size of the batches of long work under a shard's lock
// (see batch).
func (h *Hierarchy) batchSize() int {
	if h.hooks != nil && h.hooks.batch > 0 {
		return h.hooks.batch
	}
	return batch
}

// pickHook returns the test's choice of shard, if it makes one.
func (h *Hierarchy) pickHook() func() *shard {
	if h.hooks == nil {
		return nil
	}
	return h.hooks.pick
}

// betweenBatchesHook returns the test's hook between batches, if any.
func (h *Hierarchy) betweenBatchesHook() func() {
	if h.hooks == nil {
		return nil
	}
	return h.hooks.betweenBatches
}
