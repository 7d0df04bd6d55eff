package bound

import (
	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// fastModeBeta is the beta Anthropic's fast mode is asked for with.
const fastModeBeta = "fast-mode-2026-02-01"

// modes sets the multiple of the model's price r bills at: Anthropic's
// fast mode (speed "fast": m.FastMode, 6× on Opus 4.6) and US-only
// inference (inference_geo "us": m.GeoUS, 1.1×), together their
// product. A mode the model has no multiple for is refused: it would
// bill above the price the bound reserves at.
func (r *messagesRequest) modes(m *Model, p *Prepared) error {
	p.PerMille = 1000
	if r.Speed != nil {
		switch *r.Speed {
		case "standard":
		case "fast":
			if m.FastMode == 0 {
				return badRequest("speed", "fast mode bills a multiple of the model's price (Anthropic: 6×), and %s has none: set models.%s.fast_mode, or leave speed out", m.Name, m.Name)
			}
			p.PerMille, p.fast = m.FastMode, m.FastMode
		default:
			return badRequest("speed", "must be %q or %q", "standard", "fast")
		}
	}
	if r.InferenceGeo != nil {
		switch *r.InferenceGeo {
		case "global":
		case "us":
			if m.GeoUS == 0 {
				return badRequest("inference_geo", "US-only inference bills a multiple of the model's price (Anthropic: 1.1×), and %s has none: set models.%s.inference_geo_us, or leave inference_geo out", m.Name, m.Name)
			}
			p.PerMille, p.geo = p.PerMille*m.GeoUS/1000, m.GeoUS
		default:
			return badRequest("inference_geo", "must be %q or %q", "global", "us")
		}
	}
	return nil
}

// PriceAsServed is the price p is settled at, from its deployment's list
// price and the usage its answer reported: Anthropic bills the speed and
// region a request ran at (usage.speed, usage.inference_geo), and a fast
// request its model no longer (or cannot now) run fast runs, and bills,
// at standard speed. A multiple the answer does not deny stays; none is
// added that the request did not ask for and reserve.
func (p *Prepared) PriceAsServed(list budget.Price, u convert.Usage) (budget.Price, error) {
	perMille := int64(1000)
	if p.fast > 0 && u.Speed != "standard" {
		perMille = p.fast
	}
	if p.geo > 0 && (u.Geo == "" || u.Geo == "us") {
		perMille = perMille * p.geo / 1000
	}
	if perMille == 1000 {
		return list, nil
	}
	return list.Times(perMille)
}

// Price is the price p bills at, from its deployment's list price: the
// list price times the multiple its mode and region bill (PerMille).
func (p *Prepared) Price(list budget.Price) (budget.Price, error) {
	if p.PerMille == 0 {
		return list, nil
	}
	return list.Times(p.PerMille)
}
