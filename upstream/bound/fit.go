package bound

// Fit is the largest output cap per choice in [1, below) for which fits
// holds, fits being true up to some cap and false above it (a request
// costs more the more it may generate); 0 when it holds for none. The
// gateway asks it for the cap that fits what a budget has left.
func Fit(below int64, fits func(k int64) bool) int64 {
	lo, hi := int64(1), below-1
	if hi < lo || !fits(lo) {
		return 0
	}
	for lo < hi {
		if mid := lo + (hi-lo+1)/2; fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}
