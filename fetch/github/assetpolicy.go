package github

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/murmur-nexus/mur/internal/errs"
)

// assetAsk is one request for an asset's bytes, for askAsset.
type assetAsk struct {
	owner, repo string
	a           Asset
	// web allows the download link: false for a repository that needs the token, and for a
	// ranger whose link failed already.
	web bool
	// hdr goes to every hop (Range, If-Range); it carries no credential.
	hdr http.Header
	// linkOK says whether the link's answer is the asset at all (not a login page, nor another
	// length); only then is it used instead of asking the API.
	linkOK func(*http.Response) bool
	// use consumes an answer and owns its body. From the link, errTryTheAPI says nothing of it
	// was used, so the API may answer instead; from the API, again asks for a retry.
	use func(resp *http.Response, fromLink bool) (again bool, err error)
	// linkFailed, when set, is told that the link failed and the API was asked.
	linkFailed func()
}

// errTryTheAPI marks a download link that failed before any of its bytes were used.
var errTryTheAPI = errors.New("the download link failed; try the API")

// askAsset is the one policy for where an asset's bytes come from. The asset's
// browser_download_url comes first, asked once: a link on GitHub's web host, not the API, so it
// spends no quota, and retries would only delay the fallback. The API's asset endpoint
// (Accept: application/octet-stream, with the token, and retries) answers for a private
// repository, an asset without a usable link, and a link that fails before any byte is used.
// Either way the redirect to storage is followed without any credential.
func (c *Client) askAsset(ctx context.Context, ask assetAsk) error {
	if link, ok := c.downloadLink(ask.a); ok && ask.web {
		resp, err := c.getEvery(ctx, link, acceptBytes, nil, ask.hdr)
		if err == nil {
			if ask.linkOK(resp) {
				_, err = ask.use(resp, true)
				if !errors.Is(err, errTryTheAPI) {
					return err
				}
			} else {
				resp.Body.Close()
			}
		}
		if ctx.Err() != nil {
			return errs.Wrap(ctx.Err(), errs.Network, "fetching %s was abandoned: %v", assetWhat(ask.owner, ask.repo, ask.a), ctx.Err())
		}
		// Why no longer matters: the API answers instead, and its error is the one to report.
		if ask.linkFailed != nil {
			ask.linkFailed()
		}
	}
	u := c.apiURL("repos", ask.owner, ask.repo, "releases", "assets", strconv.FormatInt(ask.a.ID, 10))
	return c.retry(ctx, u, func(ctx context.Context) (bool, error) {
		resp, err := c.getEvery(ctx, u, acceptBytes, nil, ask.hdr)
		if err != nil {
			return true, err
		}
		return ask.use(resp, false)
	})
}

// assetWhat names an asset in messages.
func assetWhat(owner, repo string, a Asset) string {
	if a.Name == "" {
		return "asset " + strconv.FormatInt(a.ID, 10) + " in " + owner + "/" + repo
	}
	return "asset " + a.Name + " in " + owner + "/" + repo
}

// mediaType is an answer's Content-Type without its parameters.
func mediaType(resp *http.Response) string {
	return strings.ToLower(strings.TrimSpace(strings.Split(resp.Header.Get("Content-Type"), ";")[0]))
}
