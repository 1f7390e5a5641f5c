package awstest

// domainOps are the SageMaker Domain operations (CreateDomain, ...).
// Placeholder until the domain endpoint lands.
func (f *SageMaker) domainOps() map[string]handler { return map[string]handler{} }
