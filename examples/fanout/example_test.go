package main

import "fmt"

// The job the example fans out: six items of 100 squares each, in four
// checkpointed steps per item; the aggregate is checked in closed form.
func Example_job() {
	var item5 int64
	for step := 1; step <= stepCount; step++ {
		item5 += stepSum(5, step)
	}
	fmt.Println("item 5:", item5)
	fmt.Println("total of 6 items:", expectedTotal(6))
	// Output:
	// item 5: 30388350
	// total of 6 items: 72180100
}
