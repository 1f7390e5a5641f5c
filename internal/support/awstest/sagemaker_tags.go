package awstest

import (
	"net/http"
	"regexp"
	"strings"
)

// The SageMaker tagging operations, on the endpoint's compute quotas and
// domains: ListTags (the only way to read them: neither
// DescribeComputeQuota nor DescribeDomain returns tags, see
// aws-sdk-go-v2/service/sagemaker api_op_DescribeComputeQuota.go and
// api_op_DescribeDomain.go) and AddTags.

// smResourceARNPattern is ListTags' and AddTags' ResourceArn pattern (at
// most 256 characters), https://docs.aws.amazon.com/sagemaker/latest/dg/API_ListTags.html
var smResourceARNPattern = regexp.MustCompile(`^arn:aws[a-z-]*:sagemaker:[a-z0-9-]*:[0-9]{12}:.+$`)

type (
	smListTagsIn struct {
		ResourceArn *string
		MaxResults  *int32
		NextToken   *string
	}
	smAddTagsIn struct {
		ResourceArn *string
		Tags        []Tag
	}
)

func (f *SageMaker) tagOps() map[string]handler {
	return map[string]handler{
		"ListTags": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in smListTagsIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.listTags(in)
		},
		"AddTags": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in smAddTagsIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.addTags(in)
		},
	}
}

// tagsOf finds the tags of the resource arn: a compute quota (not yet
// gone) or a domain.
func (f *SageMaker) tagsOf(arn *string) (*[]Tag, *Error) {
	if arn == nil || len(*arn) > 256 || !smResourceARNPattern.MatchString(*arn) {
		return nil, Validation("ResourceArn is required and must match %s", smResourceARNPattern)
	}
	for _, q := range f.quotas {
		if q.ARN == *arn {
			return &q.Tags, nil
		}
	}
	for _, d := range f.dom.byID {
		if d.ARN == *arn {
			return &d.Tags, nil
		}
	}
	return nil, BadRequest("ResourceNotFound", "resource %s does not exist", *arn)
}

func (f *SageMaker) listTags(in smListTagsIn) (any, *Error) {
	// MaxResults: "Valid Range: Minimum value of 50" (API_ListTags).
	max := 50
	if in.MaxResults != nil {
		if *in.MaxResults < 50 {
			return nil, Validation("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value greater than or equal to 50", *in.MaxResults)
		}
		max = int(*in.MaxResults)
	}
	tags, e := f.tagsOf(in.ResourceArn)
	if e != nil {
		return nil, e
	}
	all := append([]Tag{}, *tags...)
	return listing("Tags", all, max, in.NextToken)
}

func (f *SageMaker) addTags(in smAddTagsIn) (any, *Error) {
	if in.Tags == nil {
		return nil, Validation("Tags is required")
	}
	tags, e := f.tagsOf(in.ResourceArn)
	if e != nil {
		return nil, e
	}
	merged := append([]Tag{}, *tags...)
	for _, t := range in.Tags {
		if t.Key == nil || t.Value == nil || *t.Key == "" || strings.HasPrefix(*t.Key, "aws:") {
			return nil, Validation("tags need a Key (not aws:) and a Value")
		}
		replaced := false
		for i := range merged {
			if *merged[i].Key == *t.Key {
				merged[i].Value, replaced = t.Value, true
			}
		}
		if !replaced {
			merged = append(merged, t)
		}
	}
	if len(merged) > 50 {
		return nil, Validation("a resource can have at most 50 tags")
	}
	*tags = merged
	f.event("tagged", "sagemaker")
	return map[string]any{"Tags": in.Tags}, nil
}

// SetQuotaTags replaces the tags of quota id, as someone with console
// access could; false when there is no such quota.
func (f *SageMaker) SetQuotaTags(id string, tags map[string]string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	q, ok := f.quotas[id]
	if ok {
		q.Tags = tagList(tags)
	}
	return ok
}

// SetDomainTags replaces the tags of domain id; false when there is none.
func (f *SageMaker) SetDomainTags(id string, tags map[string]string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.dom.byID[id]
	if ok {
		d.Tags = tagList(tags)
	}
	return ok
}

func tagList(m map[string]string) []Tag {
	var out []Tag
	for k, v := range m {
		out = append(out, Tag{Key: &k, Value: &v})
	}
	return out
}
