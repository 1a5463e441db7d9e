package b

var B = 1
