// Package cache is a stub of client-go's informer cache.
package cache

type Store interface {
	Add(obj interface{}) error
	Update(obj interface{}) error
	Delete(obj interface{}) error
	List() []interface{}
	Get(obj interface{}) (item interface{}, exists bool, err error)
	GetByKey(key string) (item interface{}, exists bool, err error)
}

type Indexer interface {
	Store
	ByIndex(indexName, indexedValue string) ([]interface{}, error)
}
